/**
 * The console's words and figures: counted nouns, chart titles and ranges,
 * the moment the per-GPU view is of. Pure functions, run with node's test runner.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { IHistory } from '../src/api.js';
import { checksSummary, type IChecksAnswer } from '../src/checks.js';
import { count, niceCeiling, when } from '../src/format.js';
import { asOf, NOT_PLACED } from '../src/gpus.js';
import { chartTitle, fittingRange, yRange } from '../src/history.js';

function history(times: number[], values: (number | null)[]): IHistory {
  return {
    available: true,
    step: 60,
    times,
    charts: [
      {
        title: 'Allocated GPU-equivalents',
        unit: 'GPU-equivalents',
        series: [{ name: 'team-a', values }]
      }
    ]
  } as unknown as IHistory;
}

describe('counted nouns', () => {
  test('one, many and none, never "(s)" or "(es)"', () => {
    assert.equal(count(1, 'workbench', 'workbenches'), '1 workbench');
    assert.equal(count(3, 'workbench', 'workbenches'), '3 workbenches');
    assert.equal(count(0, 'workload'), '0 workloads');
    assert.equal(count(1, 'workload'), '1 workload');
  });
});

describe('charts', () => {
  test('a title that names its unit is not given it again', () => {
    assert.equal(
      chartTitle('Allocated GPU-equivalents', 'GPU-equivalents'),
      'Allocated GPU-equivalents'
    );
    assert.equal(chartTitle('Busy', 'GPU-equivalents'), 'Busy (GPU-equivalents)');
    assert.equal(chartTitle('Queued workloads', ''), 'Queued workloads');
  });

  test('a flat chart scales to 1, not 0-100; others to a round figure above their top', () => {
    assert.deepEqual(yRange(0), [0, 1]);
    assert.deepEqual(yRange(null), [0, 1]);
    assert.deepEqual(yRange(0.28), [0, 0.5]);
    assert.deepEqual(yRange(7.43), [0, 10]);
    assert.equal(niceCeiling(120), 200);
  });

  test('the range is the shortest that holds the data there is', () => {
    const now = 1_800_000_000;
    const minutes = Array.from({ length: 10 }, (_, k) => now - (9 - k) * 60);
    // a demo ten minutes old: "last 15 min", not a sliver at the edge of "last 6h"
    assert.equal(
      fittingRange(
        history(
          minutes,
          minutes.map(() => 0.14)
        ),
        '6h'
      ),
      '15m'
    );
    const hours = Array.from({ length: 10 }, (_, k) => now - (9 - k) * 1800);
    assert.equal(
      fittingRange(
        history(
          hours,
          hours.map(() => 1)
        ),
        '6h'
      ),
      '6h'
    );
    // no data at all: the range stays
    assert.equal(
      fittingRange(
        history(
          minutes,
          minutes.map(() => null)
        ),
        '6h'
      ),
      '6h'
    );
    // never longer than the reader's
    assert.equal(
      fittingRange(
        history(
          hours,
          hours.map(() => 1)
        ),
        '1h'
      ),
      '1h'
    );
  });
});

describe('every GPU', () => {
  test('says the moment its rows are of, and where an unplaced holder is', () => {
    assert.equal(asOf(null), '');
    assert.ok(asOf('2026-12-06T10:54:11Z').startsWith('As of '));
    assert.ok(asOf('2026-12-06T10:54:11Z').endsWith(", the reclaim loop's last cycle. "));
    assert.equal(NOT_PLACED, 'not on a node yet');
  });
});

describe('the checks line', () => {
  test("says when in the reader's own time, not as the ISO text", () => {
    const at = '2026-12-07T22:55:46+00:00';
    const answer = { checked_at: at, checks: [{ status: 'ok' }, { status: 'ok' }] };
    const line = checksSummary(answer as unknown as IChecksAnswer);
    assert.equal(line, `2 checks: all ok (checked ${when(at)}).`);
    assert.ok(!line.includes('T22:55'), line);
  });
});
