import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { durationWords } from '../src/durations';

describe('durationWords', () => {
  for (const [seconds, text] of [
    [-5, '0 s'],
    [0, '0 s'],
    [44.6, '45 s'],
    [59.6, '1 min'],
    [125, '2 min'],
    [3600, '1 h'],
    [2 * 3600 + 5 * 60, '2 h 5 min'],
    [30 * 3600, '30 h'],
    [47 * 3600 + 59 * 60, '47 h 59 min'],
    [48 * 3600, '2 d'],
    [2 * 86400 + 4 * 3600 + 59 * 60, '2 d 4 h']
  ] as const) {
    test(`${String(seconds)} → ${text}`, () => {
      assert.equal(durationWords(seconds), text);
    });
  }
});
