import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  formatWaited,
  parseQueue,
  positionLabel,
  queueSignature,
  requestLabel
} from '../src/queueModel';
import type { IQueueItem } from '../src/types';

function item(overrides: Partial<IQueueItem> = {}): IQueueItem {
  return {
    kind: 'job',
    name: 'a1',
    workload: 'job-a1-x1',
    namespace: 'team-a',
    local_queue: 'training',
    cluster_queue: 'team-a-training',
    position_in_local_queue: 2,
    position_in_cluster_queue: 5,
    positions_known: true,
    offering: null,
    resources: { cpu: '1', 'nvidia.com/gpu': '2' },
    pods: 1,
    gpu_equivalents: '2',
    team: 'team-a',
    priority_class: 'training',
    waiting_since: '2026-11-30T16:31:00Z',
    waited_seconds: 540,
    reason: null,
    ...overrides
  };
}

describe('formatWaited', () => {
  for (const [seconds, text] of [
    [null, 'unknown'],
    [-1, 'unknown'],
    [45, '45 s'],
    [540, '9 min'],
    [3600, '1 h'],
    [3 * 3600 + 300, '3 h 5 min'],
    [2 * 86400 + 4 * 3600, '2 d 4 h']
  ] as const) {
    test(`${String(seconds)} → ${text}`, () => {
      assert.equal(formatWaited(seconds), text);
    });
  }
});

describe('positionLabel', () => {
  test("both positions, without the queues' names", () => {
    assert.equal(positionLabel(item()), "#2 in the team's queue · #5 in the cluster queue");
  });
  test('one position where both are the same', () => {
    assert.equal(
      positionLabel(item({ position_in_local_queue: 1, position_in_cluster_queue: 1 })),
      "#1 in the team's queue"
    );
    const same = { local_queue: 'nbjobs', cluster_queue: 'nbjobs' };
    assert.equal(
      positionLabel(item({ ...same, position_in_local_queue: 1, position_in_cluster_queue: 3 })),
      "#1 in the team's queue · #3 in the cluster queue"
    );
  });
  test('no cluster position', () => {
    assert.equal(
      positionLabel(item({ position_in_cluster_queue: null, cluster_queue: null })),
      "#2 in the team's queue"
    );
  });
  test('not placed', () => {
    assert.equal(
      positionLabel(item({ position_in_local_queue: null })),
      'not placed in the queue yet'
    );
  });
  test('not polled yet', () => {
    assert.equal(
      positionLabel(item({ position_in_local_queue: null, positions_known: false })),
      'position loading…'
    );
  });
});

describe('requestLabel', () => {
  test('resources of a Job', () => {
    assert.equal(requestLabel(item()), '2× gpu');
    assert.equal(requestLabel(item({ resources: { cpu: '1' } })), 'no GPU');
  });
  test('offering of a server', () => {
    assert.equal(
      requestLabel(item({ offering: 'local-mig-1g', gpu_equivalents: '1/7' })),
      'local-mig-1g'
    );
  });
});

describe('parseQueue', () => {
  test('accepts a payload', () => {
    const q = parseQueue({ items: [item()], teams: [], error: null, synced: true });
    assert.equal(q.items.length, 1);
    assert.equal(q.error, null);
  });
  test('rejects anything else', () => {
    assert.throws(() => parseQueue('nope'));
    assert.throws(() => parseQueue({ items: [] }));
  });
  test('signature ignores seconds but sees positions', () => {
    const q = parseQueue({ items: [item()], teams: [] });
    const later = parseQueue({ items: [item({ waited_seconds: 550 })], teams: [] });
    const moved = parseQueue({ items: [item({ position_in_local_queue: 1 })], teams: [] });
    assert.equal(queueSignature(q, null), queueSignature(later, null));
    assert.notEqual(queueSignature(q, null), queueSignature(moved, null));
  });
});
