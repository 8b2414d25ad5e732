import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  causeSentence,
  countdownLabel,
  parseCause,
  parseReclaim,
  parseStanding,
  secondsLeft,
  standingLine
} from '../src/reclaimModel';

describe('reclaim warning', () => {
  test('parses the warning, or null for none and for other shapes', () => {
    assert.equal(parseReclaim({ warning: null }), null);
    assert.equal(parseReclaim(null), null);
    assert.equal(parseReclaim({ warning: { reason: 'x' } }), null);
    const w = parseReclaim({
      server: '',
      warning: {
        warned_at: '2026-11-30T12:00:00.000Z',
        reclaim_at: '2026-11-30T12:15:00.000Z',
        seconds_left: 900,
        reason: 'queued team-a/train needs it',
        snoozes_left: 1,
        dry_run: false,
        saving: false
      }
    });
    assert.ok(w);
    assert.equal(w.snoozes_left, 1);
    assert.equal(w.saving, false);
    assert.equal(secondsLeft(w, Date.parse('2026-11-30T12:10:00Z')), 300);
    assert.equal(secondsLeft(w, Date.parse('2026-11-30T12:20:00Z')), 0);
  });

  test('counts down in words', () => {
    assert.equal(countdownLabel(0), 'now');
    assert.equal(countdownLabel(12), '12 s');
    assert.equal(countdownLabel(245), '4 min 05 s');
    assert.equal(countdownLabel(3900), '1 h 05 min');
  });
});

describe('reclaim words', () => {
  test('the cause in the words of the form, another team by its team only', () => {
    const own = parseCause({
      cause: {
        code: 'demand',
        kind: 'mig',
        idle_seconds: 2100,
        limit_seconds: null,
        for: { team: 'own', name: 'demo-train-65wzb', object: 'Job' }
      }
    });
    assert.equal(
      causeSentence(own),
      "Your team's job demo-train-65wzb is waiting for this MIG slice, idle for 35 min."
    );
    const other = parseCause({
      cause: {
        code: 'demand',
        kind: 'gpu',
        idle_seconds: null,
        limit_seconds: null,
        for: { team: 'other', name: 'Team B' }
      }
    });
    assert.equal(causeSentence(other), 'Queued work of Team B is waiting for this GPU.');
    // A team the service has no display name for is never named by its slug.
    const unnamed = parseCause({
      cause: {
        code: 'demand',
        kind: 'mig',
        idle_seconds: 600,
        limit_seconds: null,
        for: { team: 'other', name: '' }
      }
    });
    assert.equal(
      causeSentence(unnamed),
      'Queued work of another team is waiting for this MIG slice, idle for 10 min.'
    );
    const idle = parseCause({
      cause: { code: 'max-idle', kind: 'gpu', idle_seconds: 15000, limit_seconds: 14400, for: null }
    });
    assert.equal(causeSentence(idle), 'It has been idle for 4 h 10 min; the limit is 4 h.');
    assert.equal(parseCause({ cause: null }), null);
    assert.equal(causeSentence(null), '');
  });

  test("the sidebar's policy line for an idle server", () => {
    const s = parseStanding({
      known: true,
      reclaim_on: true,
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'no-demand',
      reclaim_at: null,
      policy: {
        name: 'mig-notebooks',
        idle_after_seconds: 600,
        reclaim: 'when-queued',
        max_idle_seconds: null,
        max_age_seconds: null
      }
    });
    assert.equal(
      standingLine(s),
      'Policy mig-notebooks: idle for 12 min; reclaimed after 10 min idle when queued work needs it; no queued work needs it now.'
    );
    const young = parseStanding({
      known: true,
      reclaim_on: true,
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'not-idle-yet',
      reclaim_at: null,
      policy: {
        name: 'p',
        idle_after_seconds: 1800,
        reclaim: 'when-queued',
        max_idle_seconds: 14400,
        max_age_seconds: 604800
      }
    });
    assert.equal(
      standingLine(young),
      'Policy p: idle for 12 min; reclaimed after 30 min idle when queued work needs it, or after 4 h idle in any case; at most 7 d in all; not idle long enough yet.'
    );
    assert.equal(
      standingLine(parseStanding({ known: false, reclaim_on: false })),
      'No reclaim policy is in force: this GPU is not reclaimed.'
    );
    assert.equal(
      standingLine(
        parseStanding({ known: true, reclaim_on: true, policy: null, activity: 'busy' })
      ),
      'No reclaim policy applies to this server.'
    );
  });
});
