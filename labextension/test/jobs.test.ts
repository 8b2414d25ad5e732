import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  formatLimit,
  headroomText,
  type IJob,
  jobRequest,
  jobStateLabel,
  jobsToNotify,
  parametersNote,
  parseJobs,
  parseParameters
} from '../src/jobsModel';

function job(over: Partial<IJob> = {}): IJob {
  return {
    team: 'team-a',
    namespace: 'team-a',
    name: 'nb-train-ab12c',
    notebook: 'train.ipynb',
    state: 'queued',
    finished: false,
    message: '',
    offering: 'h100',
    offering_name: 'NVIDIA H100',
    gpu_equivalents: '1',
    flavors: [],
    time_limit: null,
    created_at: null,
    started_at: null,
    finished_at: null,
    position_in_local_queue: null,
    position_in_cluster_queue: null,
    result: null,
    collected: null,
    notified: null,
    ...over
  };
}

void test('a job state in words', () => {
  assert.equal(jobStateLabel(job({ position_in_local_queue: 2 })), 'queued · #2 in the queue');
  assert.equal(
    jobStateLabel(job({ state: 'running', flavors: ['h100'] })),
    'running on h100 (NVIDIA H100)'
  );
  assert.equal(
    jobStateLabel(job({ state: 'failed', message: 'BackoffLimitExceeded' })),
    'failed: BackoffLimitExceeded'
  );
});

void test('every job state in words', () => {
  const cases: [Partial<IJob>, string][] = [
    [{ state: 'queued', position_in_local_queue: null }, 'queued'],
    [{ state: 'queued', position_in_local_queue: 1 }, 'queued · #1 in the queue'],
    [{ state: 'starting' }, 'starting'],
    [{ state: 'running', flavors: [] }, 'running (NVIDIA H100)'],
    [{ state: 'running', flavors: ['a', 'b'] }, 'running on a, b (NVIDIA H100)'],
    [{ state: 'succeeded' }, 'succeeded'],
    [{ state: 'failed', message: '' }, 'failed'],
    [{ state: 'failed', message: 'OOMKilled' }, 'failed: OOMKilled'],
    [{ state: 'stopped', message: '' }, 'stopped'],
    [{ state: 'stopped', message: 'by you' }, 'stopped: by you'],
    [{ state: 'odd' as IJob['state'] }, 'odd']
  ];
  for (const [over, expected] of cases) {
    assert.equal(jobStateLabel(job(over)), expected, JSON.stringify(over));
  }
});

void test('finished jobs are notified once, not when the server already says so', () => {
  const done = job({ state: 'succeeded', finished: true });
  const seen = job({
    name: 'nb-x',
    state: 'failed',
    finished: true,
    notified: '2026-12-02T00:00:00Z'
  });
  assert.deepEqual(jobsToNotify([done, seen, job()], new Set()), [done]);
  assert.deepEqual(jobsToNotify([done], new Set(['team-a/nb-train-ab12c'])), []);
});

void test('parameters are name = value lines, JSON where they parse', () => {
  assert.deepEqual(parseParameters('lr = 0.01\n# note\nname = run 1\nxs = [1, 2]\non=true'), {
    lr: 0.01,
    name: 'run 1',
    xs: [1, 2],
    on: true
  });
  assert.throws(() => parseParameters('justaword'), /not name = value/);
  assert.deepEqual(jobRequest('a.ipynb', 'team-a', 'h100', 1, ' ', ''), {
    path: 'a.ipynb',
    team: 'team-a',
    offering: 'h100',
    count: 1
  });
  assert.equal(formatLimit(5400), '1h30m');
  assert.deepEqual(parseJobs({ jobs: [] }), { jobs: [], error: null, error_kind: null });
  // a hub that runs no GPU jobs: the section is hidden, as on a server with no service
  assert.equal(parseJobs({ jobs: [], enabled: false }).error_kind, 'not_configured');
  assert.equal(parseJobs({ jobs: [], enabled: true }).error_kind, null);
});

function cell(tags?: unknown): Record<string, unknown> {
  return { cell_type: 'code', source: '', metadata: tags === undefined ? {} : { tags } };
}

void test('the dialog names the parameters cell the values replace, counting every cell', () => {
  const notebook = {
    cells: [
      { cell_type: 'markdown', metadata: {} },
      cell(['x', 'parameters']),
      cell(['parameters'])
    ]
  };
  assert.deepEqual(parametersNote(notebook), {
    cell: 2,
    text: 'Your values replace the defaults of the parameters cell (cell 2).'
  });
});

void test('without a parameters cell the dialog says the values may be overridden', () => {
  const text =
    'This notebook has no cell tagged "parameters": your values are set in a new first cell, ' +
    'and a later cell that sets the same name overrides them.';
  assert.deepEqual(parametersNote({ cells: [cell(), cell(['injected-parameters'])] }), {
    cell: null,
    text
  });
  // tags that are not a list of names count as none
  assert.equal(parametersNote({ cells: [cell('parameters'), { metadata: null }] })?.cell, null);
  assert.equal(parametersNote({ cells: [] })?.cell, null);
});

void test('what is not a notebook gets no note', () => {
  assert.equal(parametersNote(null), null);
  assert.equal(parametersNote('text'), null);
  assert.equal(parametersNote({ cells: 'no' }), null);
});

void test("an offering's headroom line: none, its message, and its detail after a dash", () => {
  const room = { fit: 'now', message: 'available now', detail: '', ahead: null, selectable: true };
  assert.equal(headroomText(undefined), '');
  assert.equal(headroomText(null), '');
  assert.equal(headroomText(room), 'available now');
  assert.equal(headroomText({ ...room, detail: '2 of 4 free' }), 'available now — 2 of 4 free');
});
