import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { MESSAGES, type MessageKey, say } from '../src/messages';

/**
 * The user-facing sentences as a user reads them, one per message, in a file beside this
 * test: a change to a message fails here until the file is changed too (run
 * `UPDATE_MESSAGES=1 npm test` and review the difference). npm runs tests from the root.
 */
const SNAPSHOT = join(process.cwd(), 'labextension', 'test', 'messages.json');

/** A value for every slot the table uses. */
const SAMPLE: Record<string, string | number> = {
  holding: 'this MIG slice',
  time: '14:05',
  countdown: 'in 4 min',
  duration: '4 min',
  purpose: 'for queued work',
  left: 1,
  noun: 'job',
  name: 'train-resnet',
  team: 'Team B',
  idle: '35 min',
  limit: '4 h',
  ago: '12 min ago',
  more: 'once more',
  n: 2,
  // GPU jobs
  path: 'experiments/train.ipynb',
  line: 'epochs 3',
  cell: 2,
  problem: 'the server cannot be reached',
  notebook: 'train.ipynb',
  state: 'succeeded',
  offering: 'NVIDIA H100',
  flavors: 'h100',
  position: 3,
  message: 'the time limit of 2h was reached',
  // the way up to a bigger GPU, a kernel at its cap
  next: 'Half of an L4',
  current: 'Quarter of an L4 (6 GiB)',
  peak: '2 GiB',
  title: 'Half of an L4',
  memory: '12 GiB',
  wait: ' It may have to wait for a GPU (will queue: about 2 ahead); the page shows its place in the queue.',
  why: 'will queue: about 2 ahead',
  action: 'Move to a bigger GPU: Half of an L4',
  who: 'train.ipynb',
  cap: '6 GiB',
  then: ' To go on with more, use "Move to a bigger GPU: Half of an L4" in the GPU panel.',
  // the GPU panel's figures
  id: '3f2a9c1d',
  label: 'Memory used on GPU 1',
  value: '5.6 GiB of 80 GiB (7%)',
  used: '5.6 GiB',
  total: '80 GiB',
  percent: '7%',
  util: 42,
  enforcer: 'HAMi-core',
  profile: '1g.10gb',
  index: 2,
  device: 'GPU 1',
  // the Queue section
  admitted: 4,
  pending: 2,
  what: 'Half of an L4',
  waited: '9 min',
  amount: '2',
  resource: 'gpu',
  shared: 5,
  // a notebook's saved variables
  names: '“frame”, “array” and 2 more',
  lost: '“batches” (a generator)',
  reason: 'a generator',
  size: '1.2 GiB'
};

function rendered(): Record<string, string> {
  return Object.fromEntries(
    (Object.keys(MESSAGES) as MessageKey[]).map(key => [key, say(key, SAMPLE)])
  );
}

/** What a data scientist must not be shown (docs/culler.md, "words"). */
const FORBIDDEN: [string, RegExp][] = [
  ['an unfilled slot', /\{[A-Za-z]+\}/],
  ['an ISO timestamp', /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/],
  ['an HTTP code', /\bHTTP\b|\b[1-5]\d\d\b/],
  ['a setting name', /\bc\.[A-Z]\w+\.|GPUaaS\w*\.\w+|_\w+_/],
  ['a Kubernetes word', /\b(Pod|Workload|Kueue|namespace|nvidia\.com|ClusterQueue|LocalQueue)s?\b/],
  ['a Kubernetes word', /\b(pods?|containers?|namespaces?|workloads?)\b/i],
  ['GPU-equivalents', /GPU-eq/i],
  ['"snooze"', /snooze/i],
  // a notification and the sidebar show text as it is
  ['Markdown', /`/]
];

describe('the user-facing messages', () => {
  test('match the reviewed list, each one as a user reads it', () => {
    const now = rendered();
    if (process.env.UPDATE_MESSAGES === '1') {
      writeFileSync(SNAPSHOT, JSON.stringify(now, null, 2) + '\n');
    }
    const reviewed = JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as Record<string, string>;
    assert.deepEqual(now, reviewed);
  });

  test("use a person's words", () => {
    for (const [key, text] of Object.entries(rendered())) {
      for (const [what, pattern] of FORBIDDEN) {
        assert.doesNotMatch(text, pattern, `${key} shows ${what}: ${text}`);
      }
    }
  });

  test('a notification fits in the 140 characters JupyterLab shows', () => {
    const keys = Object.keys(MESSAGES) as MessageKey[];
    const longest = (prefix: string): string =>
      keys
        .filter(k => k.startsWith(prefix))
        .map(k => MESSAGES[k])
        .reduce((a, b) => (b.length > a.length ? b : a), '');
    const worst = {
      ...SAMPLE,
      holding: longest('holding.'),
      purpose: longest('purpose.'),
      time: '12:45 PM',
      countdown: 'in 1 h 05 min'
    };
    const toasts = [
      'warn.toast',
      'warn.toastNoState',
      'stopped.toast',
      'warn.over',
      'keep.untilMore',
      'jobs.submitted'
    ] as const;
    for (const key of toasts) {
      const text = say(key, worst);
      assert.ok(text.length <= 140, `${key} is ${String(text.length)} characters: ${text}`);
    }
  });

  test('fill capitalised slots, and leave a missing one visible', () => {
    assert.equal(
      say('warn.title', { holding: 'this GPU', time: '9:05', countdown: 'in 12 s' }),
      'This GPU will be freed at 9:05 (in 12 s)'
    );
    assert.equal(say('relative.in'), 'in {duration}');
  });
});
