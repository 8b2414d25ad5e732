import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  causeSentence,
  countdownLabel,
  type IReclaimCause,
  type IStanding,
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
    assert.equal(s?.snapshot_wait_seconds, null); // a service that does not say it
    assert.equal(
      parseStanding({ known: true, snapshot_wait_seconds: 76 })?.snapshot_wait_seconds,
      76
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
    // A code the service may add later reads as nothing, even one named like an object's own
    // property (a plain object lookup would have answered with a function).
    for (const code of ['constructor', 'toString', 'something-new']) {
      const unknown = parseStanding({
        known: true,
        reclaim_on: true,
        activity: 'idle',
        idle_seconds: 720,
        action: 'skip',
        code,
        reclaim_at: null,
        policy: {
          name: 'p',
          idle_after_seconds: 600,
          reclaim: 'when-queued',
          max_idle_seconds: null,
          max_age_seconds: null
        }
      });
      assert.equal(
        standingLine(unknown),
        'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it.'
      );
    }
  });
});

// Every branch of the parsers and of the words, pinned as they were when the functions were
// split to hold eslint's complexity limit: a change in what they say shows here.
const PARSE_RECLAIM: [unknown, unknown][] = [
  [null, null],
  ['x', null],
  [{}, null],
  [{ warning: null }, null],
  [{ warning: 'w' }, null],
  [{ warning: { reason: 'r' } }, null],
  [{ warning: { reclaim_at: '2026-11-30T12:15:00.000Z' } }, null],
  [
    { warning: { reclaim_at: '2026-11-30T12:15:00.000Z', reason: 'r' } },
    {
      warned_at: '2026-11-30T12:15:00.000Z',
      reclaim_at: '2026-11-30T12:15:00.000Z',
      seconds_left: 0,
      reason: 'r',
      snoozes_left: 0,
      dry_run: false,
      saving: false,
      keeps_kernel_state: false
    }
  ],
  [
    {
      warning: {
        warned_at: '2026-11-30T12:00:00.000Z',
        reclaim_at: '2026-11-30T12:15:00.000Z',
        seconds_left: 900,
        reason: 'r',
        snoozes_left: 1,
        dry_run: true,
        saving: true,
        keeps_kernel_state: true
      }
    },
    {
      warned_at: '2026-11-30T12:00:00.000Z',
      reclaim_at: '2026-11-30T12:15:00.000Z',
      seconds_left: 900,
      reason: 'r',
      snoozes_left: 1,
      dry_run: true,
      saving: true,
      keeps_kernel_state: true
    }
  ],
  [
    {
      warning: {
        warned_at: 5,
        reclaim_at: '2026-11-30T12:15:00.000Z',
        seconds_left: '9',
        reason: 'r',
        snoozes_left: null,
        dry_run: 'yes',
        saving: 1,
        keeps_kernel_state: 'yes'
      }
    },
    {
      warned_at: '2026-11-30T12:15:00.000Z',
      reclaim_at: '2026-11-30T12:15:00.000Z',
      seconds_left: 0,
      reason: 'r',
      snoozes_left: 0,
      dry_run: false,
      saving: false,
      keeps_kernel_state: false
    }
  ]
];
const PARSE_CAUSE: [unknown, unknown][] = [
  [null, null],
  ['x', null],
  [{}, null],
  [{ cause: null }, null],
  [{ cause: 'c' }, null],
  [{ cause: { code: 'demand' } }, null],
  [{ cause: { kind: 'gpu' } }, null],
  [
    { cause: { code: 'demand', kind: 'gpu' } },
    { code: 'demand', kind: 'gpu', idle_seconds: null, limit_seconds: null, for: null }
  ],
  [
    { cause: { code: 'demand', kind: 'gpu', idle_seconds: 60, limit_seconds: 120, for: null } },
    { code: 'demand', kind: 'gpu', idle_seconds: 60, limit_seconds: 120, for: null }
  ],
  [
    {
      cause: {
        code: 'demand',
        kind: 'gpu',
        idle_seconds: NaN,
        limit_seconds: Infinity,
        for: { team: 'own', name: 'j' }
      }
    },
    {
      code: 'demand',
      kind: 'gpu',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'own', name: 'j', object: 'Workload' }
    }
  ],
  [
    {
      cause: {
        code: 'demand',
        kind: 'gpu',
        idle_seconds: '60',
        for: { team: 'own', name: 'j', object: 'Job' }
      }
    },
    {
      code: 'demand',
      kind: 'gpu',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'own', name: 'j', object: 'Job' }
    }
  ],
  [
    { cause: { code: 'demand', kind: 'gpu', for: { team: 'own', name: 'j', object: 7 } } },
    {
      code: 'demand',
      kind: 'gpu',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'own', name: 'j', object: 'Workload' }
    }
  ],
  [
    {
      cause: { code: 'demand', kind: 'gpu', for: { team: 'other', name: 'Team B', object: 'Job' } }
    },
    {
      code: 'demand',
      kind: 'gpu',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'other', name: 'Team B' }
    }
  ],
  [
    { cause: { code: 'demand', kind: 'gpu', for: { team: 'mine', name: 'j' } } },
    { code: 'demand', kind: 'gpu', idle_seconds: null, limit_seconds: null, for: null }
  ],
  [
    { cause: { code: 'demand', kind: 'gpu', for: { team: 'own', name: 3 } } },
    { code: 'demand', kind: 'gpu', idle_seconds: null, limit_seconds: null, for: null }
  ]
];
const CAUSE_SENTENCE: [IReclaimCause | null, string][] = [
  [null, ''],
  [
    {
      code: 'demand',
      kind: 'mig',
      idle_seconds: 600,
      limit_seconds: null,
      for: { team: 'own', name: 'n1', object: 'Job' }
    },
    "Your team's job n1 is waiting for this MIG slice, idle for 10 min."
  ],
  [
    {
      code: 'demand',
      kind: 'mig',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'own', name: 'n1', object: 'Pod' }
    },
    "Your team's notebook n1 is waiting for this MIG slice."
  ],
  [
    {
      code: 'demand',
      kind: 'mig',
      idle_seconds: 600,
      limit_seconds: null,
      for: { team: 'own', name: 'n1', object: 'Workload' }
    },
    "Your team's work n1 is waiting for this MIG slice, idle for 10 min."
  ],
  [
    {
      code: 'demand',
      kind: 'mig',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'other', name: 'Team B' }
    },
    'Queued work of Team B is waiting for this MIG slice.'
  ],
  [
    {
      code: 'demand',
      kind: 'mig',
      idle_seconds: 600,
      limit_seconds: null,
      for: { team: 'other', name: '' }
    },
    'Queued work of another team is waiting for this MIG slice, idle for 10 min.'
  ],
  [
    { code: 'demand', kind: 'mig', idle_seconds: 600, limit_seconds: null, for: null },
    'Queued work is waiting for this MIG slice.'
  ],
  [
    {
      code: 'placement',
      kind: 'mig',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'own', name: 'n1', object: 'Job' }
    },
    "Your team's job n1 needs a whole GPU, and this idle share is on the card it can use."
  ],
  [
    {
      code: 'placement',
      kind: 'mig',
      idle_seconds: 600,
      limit_seconds: null,
      for: { team: 'own', name: 'n1', object: 'Workload' }
    },
    "Your team's work n1 needs a whole GPU, and this idle share is on the card it can use."
  ],
  [
    {
      code: 'placement',
      kind: 'mig',
      idle_seconds: null,
      limit_seconds: null,
      for: { team: 'other', name: 'Team B' }
    },
    'A training Job needs a whole GPU; your idle share is on the card it can use.'
  ],
  [
    { code: 'placement', kind: 'mig', idle_seconds: null, limit_seconds: null, for: null },
    'A training Job needs a whole GPU; your idle share is on the card it can use.'
  ],
  [
    { code: 'max-idle', kind: 'mig', idle_seconds: 900, limit_seconds: 3600, for: null },
    'It has been idle for 15 min; the limit is 1 h.'
  ],
  [
    { code: 'max-idle', kind: 'mig', idle_seconds: null, limit_seconds: 3600, for: null },
    'It has been idle for a long time; the limit is 1 h.'
  ],
  [
    { code: 'max-idle', kind: 'mig', idle_seconds: 900, limit_seconds: null, for: null },
    'It has been idle for 15 min.'
  ],
  [
    { code: 'max-idle', kind: 'mig', idle_seconds: null, limit_seconds: null, for: null },
    'It has been idle for a long time.'
  ],
  [
    { code: 'always', kind: 'mig', idle_seconds: 900, limit_seconds: null, for: null },
    'It has been idle for 15 min, and idle GPUs go back to the pool.'
  ],
  [
    { code: 'always', kind: 'mig', idle_seconds: null, limit_seconds: null, for: null },
    'It has been idle for a while, and idle GPUs go back to the pool.'
  ],
  [
    { code: 'max-age', kind: 'mig', idle_seconds: null, limit_seconds: 3600, for: null },
    'This server has run for the longest a server may run (1 h), even while in use.'
  ],
  [
    { code: 'max-age', kind: 'mig', idle_seconds: null, limit_seconds: null, for: null },
    'This server has run for the longest a server may run, even while in use.'
  ],
  [{ code: 'odd', kind: 'mig', idle_seconds: 600, limit_seconds: 600, for: null }, ''],
  [
    { code: 'demand', kind: 'shared', idle_seconds: null, limit_seconds: null, for: null },
    'Queued work is waiting for this shared GPU.'
  ],
  [
    { code: 'demand', kind: 'fraction', idle_seconds: null, limit_seconds: null, for: null },
    'Queued work is waiting for this GPU share.'
  ],
  [
    { code: 'demand', kind: 'cpu', idle_seconds: null, limit_seconds: null, for: null },
    'Queued work is waiting for this server.'
  ],
  [
    { code: 'demand', kind: 'gpu', idle_seconds: null, limit_seconds: null, for: null },
    'Queued work is waiting for this GPU.'
  ],
  [
    { code: 'demand', kind: 'other', idle_seconds: null, limit_seconds: null, for: null },
    'Queued work is waiting for this GPU.'
  ]
];
type IStandingPolicy = NonNullable<IStanding['policy']>;

/** What parseStanding answers for a server no cycle has judged, with `fields` over it. */
function standing(fields: Partial<IStanding> = {}): IStanding {
  return {
    known: false,
    reclaim_on: false,
    policy: null,
    activity: '',
    idle_seconds: null,
    action: '',
    code: '',
    reclaim_at: null,
    decided_at: null,
    now: null,
    snapshot_wait_seconds: null,
    ...fields
  };
}

/** Policy p (reclaimed after 10 min idle when queued work needs it), with `fields` over it. */
function policy(fields: Partial<IStandingPolicy> = {}): IStandingPolicy {
  return {
    name: 'p',
    idle_after_seconds: 600,
    reclaim: 'when-queued',
    max_idle_seconds: null,
    max_age_seconds: null,
    ...fields
  };
}

const PARSE_STANDING: [unknown, unknown][] = [
  [null, null],
  ['x', null],
  [{}, standing()],
  [{ known: false }, standing()],
  [{ known: false, reclaim_on: true }, standing({ reclaim_on: true })],
  [{ known: 'yes', reclaim_on: true }, standing({ reclaim_on: true })],
  [{ known: true }, standing({ known: true, activity: 'unknown' })],
  [
    { known: true, reclaim_on: true, policy: null },
    standing({ known: true, reclaim_on: true, activity: 'unknown' })
  ],
  [
    { known: true, reclaim_on: true, policy: { name: 'p' } },
    standing({ known: true, reclaim_on: true, activity: 'unknown' })
  ],
  [
    { known: true, reclaim_on: true, policy: { name: 'p', idle_after_seconds: 60 } },
    standing({
      known: true,
      reclaim_on: true,
      policy: policy({ idle_after_seconds: 60 }),
      activity: 'unknown'
    })
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy({ idle_after_seconds: 60, reclaim: 'always', max_idle_seconds: 120 }),
      activity: 'idle',
      idle_seconds: 30,
      action: 'warn',
      code: 'demand',
      reclaim_at: '2026-11-30T12:15:00.000Z',
      decided_at: '2026-11-30T12:00:00.000Z',
      now: '2026-11-30T12:00:05.000Z'
    }),
    standing({
      known: true,
      reclaim_on: true,
      policy: policy({ idle_after_seconds: 60, reclaim: 'always', max_idle_seconds: 120 }),
      activity: 'idle',
      idle_seconds: 30,
      action: 'warn',
      code: 'demand',
      reclaim_at: '2026-11-30T12:15:00.000Z',
      decided_at: '2026-11-30T12:00:00.000Z',
      now: '2026-11-30T12:00:05.000Z'
    })
  ],
  [
    {
      known: true,
      reclaim_on: 1,
      activity: 5,
      idle_seconds: '3',
      action: null,
      code: 7,
      reclaim_at: 1,
      decided_at: 2,
      now: 3
    },
    standing({ known: true, activity: 'unknown' })
  ]
];
const STANDING_LINE: [IStanding | null, number | undefined, string][] = [
  [null, undefined, ''],
  [standing(), undefined, 'No reclaim policy is in force: this GPU is not reclaimed.'],
  [standing({ reclaim_on: true }), undefined, ''],
  [
    standing({ known: true, reclaim_on: true, activity: 'busy' }),
    undefined,
    'No reclaim policy applies to this server.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'busy',
      action: 'skip',
      code: 'no-demand'
    }),
    undefined,
    'Policy p: in use now; reclaimed after 10 min idle when queued work needs it; no queued work needs it now.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy({ max_idle_seconds: 3600, max_age_seconds: 86400 }),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'not-idle-yet'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it, or after 1 h idle in any case; at most 24 h in all; not idle long enough yet.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy({ max_idle_seconds: 3600, max_age_seconds: 86400 }),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'not-idle-yet'
    }),
    1500,
    'Policy p: idle for 25 min; reclaimed after 10 min idle when queued work needs it, or after 1 h idle in any case; at most 24 h in all; not idle long enough yet.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      action: 'skip',
      code: 'no-demand'
    }),
    undefined,
    'Policy p: activity unknown; reclaimed after 10 min idle when queued work needs it; no queued work needs it now.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'unknown',
      action: 'skip',
      code: 'no-demand'
    }),
    undefined,
    'Policy p: activity unknown; reclaimed after 10 min idle when queued work needs it; no queued work needs it now.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy({ reclaim: 'always', max_idle_seconds: 3600, max_age_seconds: 86400 }),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'not-idle-yet'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle, or after 1 h idle in any case; at most 24 h in all.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy({ reclaim: 'always', max_idle_seconds: 3600, max_age_seconds: 86400 }),
      activity: 'idle',
      idle_seconds: 3000,
      action: 'skip',
      code: 'always'
    }),
    undefined,
    'Policy p: idle for 50 min; reclaimed after 10 min idle, or after 1 h idle in any case; at most 24 h in all; idle long enough.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'busy'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'exempt'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; exempt.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'snoozed'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; kept for now ("Keep my GPU").'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'demand'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; queued work needs it now.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'placement'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; a training Job needs the whole card it is on.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'max-idle'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; idle past the limit.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'max-age'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; past the longest run.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'skip',
      code: 'odd'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it.'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'warn',
      code: 'demand'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; a reclaim is coming (see above).'
  ],
  [
    standing({
      known: true,
      reclaim_on: true,
      policy: policy(),
      activity: 'idle',
      idle_seconds: 720,
      action: 'wait',
      code: 'placement'
    }),
    undefined,
    'Policy p: idle for 12 min; reclaimed after 10 min idle when queued work needs it; a reclaim is coming (see above).'
  ]
];

describe('reclaim model, every branch pinned', () => {
  test('parseReclaim', () => {
    for (const [data, expected] of PARSE_RECLAIM) {
      assert.deepEqual(parseReclaim(data), expected, JSON.stringify(data));
    }
  });

  test('parseCause', () => {
    for (const [data, expected] of PARSE_CAUSE) {
      assert.deepEqual(parseCause(data), expected, JSON.stringify(data));
    }
  });

  test('causeSentence', () => {
    for (const [cause, expected] of CAUSE_SENTENCE) {
      assert.equal(causeSentence(cause), expected, JSON.stringify(cause));
    }
  });

  test('parseStanding', () => {
    for (const [data, expected] of PARSE_STANDING) {
      assert.deepEqual(parseStanding(data), expected, JSON.stringify(data));
    }
  });

  test('standingLine', () => {
    for (const [standing, idleNow, expected] of STANDING_LINE) {
      assert.equal(standingLine(standing, idleNow), expected, JSON.stringify(standing));
    }
  });
});
