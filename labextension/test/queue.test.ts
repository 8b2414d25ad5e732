import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  formatWaited,
  itemTeamLabel,
  parseQueue,
  positionLabel,
  queueSignature,
  requestLabel,
  teamLabels,
  waitingFor
} from '../src/queueModel';
import type { IQueueItem, IQueueTeam } from '../src/types';

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
    offering_display_name: null,
    resources: { cpu: '1', 'nvidia.com/gpu': '2' },
    pods: 1,
    gpu_equivalents: '2',
    team: 'team-a',
    team_display_name: null,
    priority_class: 'training',
    waiting_since: '2026-11-30T16:31:00Z',
    waited_seconds: 540,
    reason: null,
    waiting_for: null,
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

describe('waitingFor', () => {
  test("the service's words for a Job that Kueue's topology holds back", () => {
    assert.equal(
      waitingFor(item({ waiting_for: 'waiting for a whole node' })),
      'waiting for a whole node'
    );
  });
  test('nothing while it waits for quota, or from an older service', () => {
    assert.equal(waitingFor(item()), null);
    assert.equal(waitingFor(item({ waiting_for: '' })), null);
    const older: Partial<IQueueItem> = { waiting_for: undefined };
    assert.equal(waitingFor(item(older)), null);
  });
  test('a changed wait renders again', () => {
    const before = parseQueue({ items: [item()], teams: [] });
    const after = parseQueue({
      items: [item({ waiting_for: 'waiting for a whole node' })],
      teams: []
    });
    assert.notEqual(queueSignature(before, null), queueSignature(after, null));
  });
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

function team(overrides: Partial<IQueueTeam> = {}): IQueueTeam {
  return {
    team: 'team-a',
    display_name: null,
    admitted: 4,
    pending: 2,
    cluster_queues: [],
    ...overrides
  };
}

describe('requestLabel', () => {
  test('GPU resources of a Job, in words', () => {
    assert.equal(requestLabel(item()), '2× GPU');
    assert.equal(requestLabel(item({ resources: { cpu: '1' } })), 'no GPU');
    assert.equal(
      requestLabel(item({ resources: { 'nvidia.com/mig-1g.10gb': '1' } })),
      '1× MIG 1g.10gb'
    );
    assert.equal(
      requestLabel(item({ resources: { 'nvidia.com/gpu.shared': '1' } })),
      '1× shared GPU'
    );
  });
  test("the offering's name in the catalog", () => {
    assert.equal(
      requestLabel(item({ offering: 'local-mig-1g', offering_display_name: 'A100 MIG 1g.5gb' })),
      'A100 MIG 1g.5gb'
    );
  });
  test('never the slug: without a name, what it asked for', () => {
    const text = requestLabel(
      item({ offering: 'local-mig-1g', resources: { 'nvidia.com/mig-1g.5gb': '1' } })
    );
    assert.equal(text, '1× MIG 1g.5gb');
  });
});

describe('team names', () => {
  test("an item's team by its name, else 'your team'", () => {
    assert.equal(itemTeamLabel(item({ team_display_name: 'Team A' })), 'Team A');
    assert.equal(itemTeamLabel(item()), 'your team');
  });
  test('rows by their names; unnamed ones as your teams, numbered when several', () => {
    assert.deepEqual(teamLabels([team({ display_name: 'Team A' })]), ['Team A']);
    assert.deepEqual(teamLabels([team()]), ['Your team']);
    assert.deepEqual(
      teamLabels([
        team(),
        team({ team: 'team-b', display_name: 'Team B' }),
        team({ team: 'team-c' })
      ]),
      ['Your team 1', 'Team B', 'Your team 2']
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
  test('signature sees a name arrive', () => {
    const q = parseQueue({ items: [item()], teams: [team()] });
    const named = parseQueue({
      items: [item({ team_display_name: 'Team A' })],
      teams: [team({ display_name: 'Team A' })]
    });
    assert.notEqual(queueSignature(q, null), queueSignature(named, null));
  });
});
