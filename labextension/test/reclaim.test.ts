import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { countdownLabel, parseReclaim, secondsLeft } from '../src/reclaimModel';

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
