import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  agoWords,
  idleSecondsNow,
  inWords,
  inWordsCoarse,
  localTime,
  parseCause,
  parseReclaim,
  parseStanding,
  parseWithdrawn,
  standingLine
} from '../src/reclaimModel';
import {
  alertView,
  EMPTY_STATE,
  type IReclaimState,
  isServerGone,
  lostToReclaim,
  noteWords,
  prefixedTitle,
  stoppedWords,
  withAnswer,
  withFailure,
  withKept
} from '../src/reclaimState';

const T0 = Date.parse('2026-12-03T14:00:00Z');
const HUB = '/hub/home';

function warned(overrides: Record<string, unknown> = {}): IReclaimState {
  const answer = {
    now: '2026-12-03T14:00:00Z',
    warning: {
      warned_at: '2026-12-03T13:58:00.000Z',
      reclaim_at: '2026-12-03T14:04:00.000Z',
      seconds_left: 240,
      reason: 'queued team-a/train needs what it holds (nvidia.com/mig-1g.5gb on local)',
      snoozes_left: 1,
      dry_run: false,
      saving: false,
      keeps_kernel_state: true,
      cause: {
        code: 'demand',
        kind: 'mig',
        idle_seconds: 600,
        limit_seconds: null,
        for: { team: 'own', name: 'train', object: 'Job' }
      },
      ...overrides
    }
  };
  const warning = parseReclaim(answer);
  return withAnswer(EMPTY_STATE, warning, parseCause(answer.warning), 0, T0);
}

describe('relative times', () => {
  test('count down in the sidebar, coarser in a notification', () => {
    assert.equal(inWords(245), 'in 4 min 05 s');
    assert.equal(inWords(0), 'any moment now');
    assert.equal(inWordsCoarse(245), 'in 5 min');
    assert.equal(inWordsCoarse(60), 'in 1 min');
    assert.equal(inWordsCoarse(41), 'in 50 s');
    assert.equal(inWordsCoarse(0), 'any moment now');
    assert.equal(agoWords(2), 'just now');
    assert.equal(agoWords(125), '2 min ago');
  });

  test('a time of day, never an ISO timestamp', () => {
    const time = localTime(T0);
    assert.match(time, /^\d{1,2}[:.]\d{2}( ?[AP]M)?$/i);
    assert.equal(localTime('not a time'), '');
  });

  test('the idle time counts on from the service decision, and stops when busy', () => {
    const s = parseStanding({
      known: true,
      reclaim_on: true,
      activity: 'idle',
      idle_seconds: 19,
      decided_at: '2026-12-03T14:00:00Z',
      now: '2026-12-03T14:00:10Z',
      action: 'skip',
      code: 'no-demand',
      policy: { name: 'p', idle_after_seconds: 600, reclaim: 'when-queued' }
    });
    assert.equal(idleSecondsNow(s, 0), 29);
    assert.equal(idleSecondsNow(s, 31_000), 60);
    assert.match(standingLine(s, idleSecondsNow(s, 31_000) ?? undefined), /idle for 1 min;/);
    assert.equal(idleSecondsNow(s && { ...s, activity: 'busy' }, 5000), null);
  });
});

describe('the alerts of a warning', () => {
  test('a notification with both actions, the tab and title marks, the browser', () => {
    const view = alertView(warned(), T0, HUB);
    const time = localTime(Date.parse('2026-12-03T14:04:00Z'));
    assert.ok(view.toast);
    assert.equal(
      view.toast.message,
      `This MIG slice will be freed at ${time} (in 4 min) for queued work. Files stay; saved ` +
        'variables come back.'
    );
    assert.equal(view.toast.type, 'warning');
    assert.deepEqual(view.toast.actions, ['keep', 'save']);
    assert.equal(view.titlePrefix, 'GPU freed in 4 min · ');
    assert.equal(view.tab, 'warned');
    assert.equal(view.tabCaption, `GPU: this MIG slice will be freed at ${time}`);
    assert.equal(view.browser?.title, `Your GPU will be freed at ${time}`);
    assert.equal(view.browser.tag, view.toast.key);
  });

  test('the same warning keeps its key while its words count down', () => {
    const state = warned();
    const first = alertView(state, T0, HUB);
    const later = alertView(state, T0 + 200_000, HUB);
    assert.equal(later.toast?.key, first.toast?.key);
    assert.match(later.toast?.message ?? '', /\(in 40 s\)/);
    assert.equal(later.titlePrefix, 'GPU freed in 40 s · ');
  });

  test('no "Keep my GPU" when none is left; a trial run alerts nobody', () => {
    assert.deepEqual(alertView(warned({ snoozes_left: 0 }), T0, HUB).toast?.actions, ['save']);
    const trial = alertView(warned({ dry_run: true }), T0, HUB);
    assert.equal(trial.toast, null);
    assert.equal(trial.titlePrefix, '');
    assert.equal(trial.tab, null);
  });

  test('the service clock corrects the countdown', () => {
    const state = { ...warned(), skewMs: 60_000 }; // the service is a minute ahead
    assert.match(alertView(state, T0, HUB).toast?.message ?? '', /\(in 3 min\)/);
  });

  test('the title gets one mark, replaced as it changes', () => {
    assert.equal(
      prefixedTitle('a.ipynb - JupyterLab', 'GPU freed in 4 min · ', ''),
      'GPU freed in 4 min · a.ipynb - JupyterLab'
    );
    assert.equal(
      prefixedTitle(
        'GPU freed in 4 min · a.ipynb - JupyterLab',
        'GPU freed in 3 min · ',
        'GPU freed in 4 min · '
      ),
      'GPU freed in 3 min · a.ipynb - JupyterLab'
    );
    assert.equal(prefixedTitle('GPU freed in 3 min · x', '', 'GPU freed in 3 min · '), 'x');
  });
});

describe('what the stop loses, as the service will do it', () => {
  test('kept state: the variables are saved and come back, the kernels do not just stop', () => {
    const view = alertView(warned(), T0, HUB);
    assert.ok(view.toast);
    assert.match(view.toast.message, /saved variables come back\.$/);
    assert.doesNotMatch(view.toast.message, /running kernels stop/);
  });

  test('no kept state, or a service that does not say: the variables are lost', () => {
    for (const keeps of [false, undefined]) {
      const state = warned({ keeps_kernel_state: keeps });
      const view = alertView(state, T0, HUB);
      assert.ok(view.toast);
      assert.match(view.toast.message, /Files stay; variables are lost\.$/);
      const stopped = withFailure(state, { status: 424 }, Date.parse('2026-12-03T14:04:05Z'));
      assert.ok(stopped.stopped);
      assert.equal(
        stoppedWords(stopped.stopped, T0, HUB).kept,
        'Your files are kept. Running kernels stopped, and their variables were not kept: run ' +
          'the notebooks again.'
      );
    }
  });
});

describe('the old tab after the stop', () => {
  test('the server gone at the deadline: stopped, with what the warning said', () => {
    const state = withFailure(warned(), { status: 424 }, Date.parse('2026-12-03T14:04:05Z'));
    assert.equal(state.warning, null);
    assert.ok(state.stopped);
    const now = Date.parse('2026-12-03T14:16:05Z');
    const words = stoppedWords(state.stopped, now, HUB);
    const time = localTime(Date.parse('2026-12-03T14:04:05Z'));
    assert.equal(words.title, 'Your server was stopped');
    assert.equal(
      words.when,
      `It was stopped at about ${time} (12 min ago) to free this MIG slice for queued work.`
    );
    assert.equal(
      words.kept,
      'Your files are kept. Running kernels stopped: the variables they could save come back ' +
        'when you open each notebook again, and a notice there says which did not.'
    );
    assert.equal(words.next, "To go on, start your server again from the hub's home page.");
    assert.equal(stoppedWords(state.stopped, now, null).next, 'To go on, start your server again.');
    const view = alertView(state, now, HUB);
    assert.ok(view.toast);
    assert.equal(view.toast.type, 'info');
    assert.deepEqual(view.toast.actions, ['startAgain']);
    assert.equal(
      view.toast.message,
      `Your server was stopped at about ${time} to free this MIG slice for queued work. Your files are kept.`
    );
    assert.equal(view.titlePrefix, 'Server stopped · ');
    assert.equal(view.tab, 'stopped');
    assert.deepEqual(alertView(state, now, null).toast?.actions, []);
  });

  test('no conclusion before the deadline, for a trial run, or for another failure', () => {
    const early = Date.parse('2026-12-03T14:01:00Z');
    assert.equal(withFailure(warned(), { status: 0 }, early).stopped, null);
    const late = Date.parse('2026-12-03T14:05:00Z');
    assert.equal(withFailure(warned({ dry_run: true }), { status: 424 }, late).stopped, null);
    assert.equal(withFailure(warned(), { status: 500 }, late).stopped, null);
    assert.equal(withFailure(EMPTY_STATE, { status: 424 }, late).stopped, null);
    assert.ok(withFailure(warned(), { status: 0 }, late).stopped);
    assert.deepEqual(
      [0, 424, 502, 503, 404, -1].map(s => isServerGone({ status: s })),
      [true, true, true, true, false, false]
    );
  });

  test('an answer again (the server was started again): nothing is stopped', () => {
    const stopped = withFailure(warned(), { status: 424 }, Date.parse('2026-12-03T14:05:00Z'));
    const back = withAnswer(stopped, null, null, 0, Date.parse('2026-12-03T14:20:00Z'));
    assert.equal(back.stopped, null);
    assert.equal(alertView(back, T0, HUB).toast, null);
  });

  test('a warning that vanishes at its deadline is the stop beginning', () => {
    const atDeadline = Date.parse('2026-12-03T14:04:01Z');
    const held = withAnswer(warned(), null, null, 0, atDeadline);
    assert.ok(held.warning, 'the service forgot it as it stopped the server');
    assert.ok(withFailure(held, { status: 424 }, atDeadline + 5000).stopped);
    // Still answering two minutes on: the warning is over after all.
    assert.equal(withAnswer(held, null, null, 0, atDeadline + 121_000).warning, null);
    // Earlier, or after this tab's "Keep my GPU": the warning ends.
    assert.equal(withAnswer(warned(), null, null, 0, T0).warning, null);
    const kept: IReclaimState = {
      ...warned(),
      note: { kind: 'kept', until: null, snoozesLeft: 0, warnedAt: '2026-12-03T13:58:00.000Z' }
    };
    assert.equal(withAnswer(kept, null, null, 0, atDeadline).warning, null);
  });

  test('a warning the service says it withdrew is over, even in the last seconds', () => {
    // 20 s before its deadline the work it was for went away: the service withdrew it
    const late = Date.parse('2026-12-03T14:03:40Z');
    const gone = withAnswer(warned(), null, null, 0, late, '2026-12-03T13:58:00.000Z');
    assert.equal(gone.warning, null);
    assert.equal(alertView(gone, late, HUB).toast, null);
    // a withdrawal of an earlier warning says nothing of this one: the stop is beginning
    const other = withAnswer(warned(), null, null, 0, late, '2026-12-03T13:10:00.000Z');
    assert.ok(other.warning);
    // and what the service sends is read as it is
    assert.equal(
      parseWithdrawn({
        warning: null,
        withdrawn: { warned_at: '2026-12-03T13:58:00.000Z', withdrawn_at: '2026-12-03T14:03:40Z' }
      }),
      '2026-12-03T13:58:00.000Z'
    );
    assert.equal(parseWithdrawn({ warning: null }), null);
    assert.equal(parseWithdrawn({ warning: null, withdrawn: null }), null);
  });

  test('a dry-run warning that vanishes is over, and so is one gone well before', () => {
    const atDeadline = Date.parse('2026-12-03T14:04:01Z');
    const dry = withAnswer(warned({ dry_run: true }), null, null, 0, atDeadline);
    assert.equal(dry.warning, null);
    // a clock 10 min behind the service's: the deadline is reached by the service's clock
    const skewed = withAnswer(warned(), null, null, 600_000, atDeadline - 600_000);
    assert.ok(skewed.warning);
    assert.equal(skewed.skewMs, 600_000);
  });

  test('a kept warning is gone at once, and a late answer does not bring it back', () => {
    const before = warned();
    const kept = withKept(before, '2026-12-03T15:00:00.000Z', 0);
    assert.equal(kept.warning, null);
    assert.equal(kept.note?.kind, 'kept');
    // the service withdraws it at its next cycle: an answer from before that still has it
    const late = withAnswer(kept, before.warning, null, 0, T0 + 2000);
    assert.equal(late.warning, null);
    // a new warning (another warned_at) is shown
    assert.ok(before.warning);
    const next = { ...before.warning, warned_at: '2026-12-03T15:00:01.000Z' };
    assert.equal(withAnswer(kept, next, null, 0, T0 + 3_600_000).warning, next);
  });

  test('a later warning ends what an earlier keep said, and its stop is a stop', () => {
    const before = warned();
    assert.ok(before.warning);
    const kept = withKept(before, '2026-12-03T15:00:00.000Z', 0);
    const next = {
      ...before.warning,
      warned_at: '2026-12-03T16:00:00.000Z',
      reclaim_at: '2026-12-03T16:04:00.000Z'
    };
    const warnedAgain = withAnswer(kept, next, null, 0, Date.parse('2026-12-03T16:00:00Z'));
    assert.equal(warnedAgain.note, null, 'the old "kept until" is not this warning');
    // gone at its deadline: the stop beginning, though this tab kept an earlier warning
    const atDeadline = Date.parse('2026-12-03T16:04:01Z');
    assert.equal(withAnswer(warnedAgain, null, null, 0, atDeadline).warning, next);
  });
});

describe('the answers to "Keep my GPU"', () => {
  test('kept until a local time that counts down, and how many keeps are left', () => {
    const until = '2026-12-03T14:30:00Z';
    const time = localTime(Date.parse(until));
    assert.equal(
      noteWords({ kind: 'kept', until, snoozesLeft: 0, warnedAt: null }, T0, 0),
      `Kept: this GPU stays until ${time} (in 30 min 00 s). That was the last keep.`
    );
    assert.equal(
      noteWords({ kind: 'kept', until, snoozesLeft: 2, warnedAt: null }, T0 + 60_000, 0),
      `Kept: this GPU stays until ${time} (in 29 min 00 s). You can keep it 2 more times.`
    );
    assert.equal(
      noteWords({ kind: 'kept', until: null, snoozesLeft: 0, warnedAt: null }, T0, 0),
      'Kept.'
    );
    assert.match(noteWords({ kind: 'refused' }, T0, 0), /could not be kept/);
  });
});

describe("JupyterLab's lost-connection dialog after a reclaim", () => {
  test("the product's notice replaces it once the stop is due or seen", () => {
    const late = Date.parse('2026-12-03T14:04:05Z');
    assert.equal(lostToReclaim(withFailure(warned(), { status: 424 }, late), late), true);
    // the stop under way: the deadline near or past, the poll not failed yet
    assert.equal(lostToReclaim(warned(), Date.parse('2026-12-03T14:03:40Z')), true);
    assert.equal(lostToReclaim(warned(), late), true);
  });

  test("JupyterLab's dialog stays for any other lost connection", () => {
    assert.equal(lostToReclaim(EMPTY_STATE, T0), false);
    // minutes before the deadline: not the reclaim (the network, a restart by hand)
    assert.equal(lostToReclaim(warned(), T0), false);
    assert.equal(
      lostToReclaim(warned({ dry_run: true }), Date.parse('2026-12-03T14:05:00Z')),
      false
    );
  });
});
