import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  actionLabel,
  capMessage,
  confirmText,
  downConfirmText,
  downLabel,
  downOffer,
  type IResizeDown,
  type IResizeOffering,
  newlyAtCap,
  parseOffer,
  spawnPendingUrl
} from '../src/resizeModel';

const QUARTER: IResizeOffering = {
  slug: 'l4-quarter',
  title: 'Quarter of an L4',
  count: 1,
  memory: 6 * 2 ** 30,
  memory_text: '6 GiB'
};
const HALF: IResizeOffering = {
  slug: 'l4-half',
  title: 'Half of an L4',
  count: 1,
  memory: 12 * 2 ** 30,
  memory_text: '12 GiB',
  headroom: { fit: 'now', message: 'available now (2 of 4 free)' }
};

describe('parseOffer', () => {
  test('reads the service answer with its next size up', () => {
    const offer = parseOffer({ current: QUARTER, next: HALF, reason: '' });
    assert.deepEqual(offer, { current: QUARTER, next: HALF, reason: '', down: null });
  });

  test('keeps the reason when there is nothing bigger', () => {
    const offer = parseOffer({ current: HALF, next: null, reason: 'Team A offers nothing bigger' });
    assert.ok(offer);
    assert.equal(offer.next, null);
    assert.equal(offer.reason, 'Team A offers nothing bigger');
  });

  test('an error answer or a malformed one is no offer', () => {
    assert.equal(
      parseOffer({ error: 'No gpuaas hub service', error_kind: 'not_configured' }),
      null
    );
    assert.equal(parseOffer({ current: { slug: 3 }, next: null }), null);
    assert.equal(parseOffer('nope'), null);
    assert.equal(parseOffer(null), null);
  });

  test('a headroom that is not one is left out', () => {
    const offer = parseOffer({ current: QUARTER, next: { ...HALF, headroom: 'soon' } });
    assert.equal(offer?.next?.headroom, undefined);
  });
});

describe('the words', () => {
  test('the action names the bigger offering', () => {
    assert.equal(actionLabel(HALF), 'Move to a bigger GPU: Half of an L4');
  });

  test('the confirmation says what is saved, stopped and kept', () => {
    const text = confirmText({ current: QUARTER, next: HALF, reason: '' });
    assert.match(text, /^Every open notebook and file is saved/);
    assert.match(text, /Half of an L4 \(12 GiB\) instead of Quarter of an L4 \(6 GiB\)/);
    assert.match(text, /same home folder/);
    assert.match(text, /each idle kernel saves its variables first/);
    assert.doesNotMatch(text, /lost/);
    assert.doesNotMatch(text, /wait/);
  });

  test('the confirmation says when the bigger one may queue', () => {
    const queued = { ...HALF, headroom: { fit: 'queue', message: 'will queue: about 2 ahead' } };
    const text = confirmText({ current: QUARTER, next: queued, reason: '' });
    assert.match(text, /may have to wait for a GPU \(will queue: about 2 ahead\)/);
    assert.match(text, /place in the queue/);
  });

  test('a kernel at its cap is told the cap and the way up', () => {
    const at = { kernel: 'k1', who: 'train.ipynb', cap: '6 GiB' };
    assert.equal(
      capMessage(at, HALF),
      'train.ipynb is at its 6 GiB GPU memory cap: its next GPU allocation fails with ' +
        '"out of memory". To go on with more, use "Move to a bigger GPU: Half of an L4" in the GPU panel.'
    );
    assert.match(capMessage(at, null), /Use less GPU memory/);
  });
});

describe('spawnPendingUrl', () => {
  test('the default server and a named one', () => {
    assert.equal(spawnPendingUrl('', '/hub/', 'alice', ''), '/hub/spawn-pending/alice');
    assert.equal(
      spawnPendingUrl('https://hub.example', '/jh/hub', 'a b', 'gpu 2'),
      'https://hub.example/jh/hub/spawn-pending/a%20b/gpu%202'
    );
  });

  test('none outside JupyterHub', () => {
    assert.equal(spawnPendingUrl('', '', '', ''), null);
    assert.equal(spawnPendingUrl('', '/hub/', '', ''), null);
  });
});

describe('newlyAtCap', () => {
  test('each kernel is told once while at its cap, again after it came back to it', () => {
    const told = new Set<string>();
    const a = { kernel: 'a', who: 'a.ipynb', cap: '6 GiB' };
    const b = { kernel: 'b', who: 'b.ipynb', cap: '6 GiB' };
    assert.deepEqual(newlyAtCap(told, [a]), [a]);
    assert.deepEqual(newlyAtCap(told, [a, b]), [b]);
    assert.deepEqual(newlyAtCap(told, [a, b]), []);
    assert.deepEqual(newlyAtCap(told, [b]), []); // a went below its cap ...
    assert.deepEqual(newlyAtCap(told, [a, b]), [a]); // ... and came back to it
  });
});

const TWENTY: IResizeOffering = {
  slug: 'a100-20',
  title: 'A100 3g.20gb',
  count: 1,
  memory: 20 * 2 ** 30,
  memory_text: '20 GiB'
};
const DOWN: IResizeDown = {
  slug: 'a100-5',
  title: 'A100 1g.5gb',
  count: 1,
  memory: 5 * 2 ** 30,
  memory_text: '5 GiB',
  peak: 3 * 2 ** 30,
  peak_text: '3 GiB'
};

describe('the way down', () => {
  test('the offer reads the smaller share and the peak', () => {
    const offer = parseOffer({ current: TWENTY, next: null, reason: 'none', down: DOWN });
    assert.deepEqual(offer?.down, DOWN);
  });

  test('no way down, or one that is not one, is none', () => {
    assert.equal(parseOffer({ current: TWENTY, next: null, reason: '' })?.down, null);
    assert.equal(parseOffer({ current: TWENTY, next: null, down: null })?.down, null);
    const noPeak = { ...DOWN, peak: 'lots' };
    assert.equal(parseOffer({ current: TWENTY, next: null, down: noPeak })?.down, null);
    const noMemory = { ...DOWN, memory: null };
    assert.equal(parseOffer({ current: TWENTY, next: null, down: noMemory })?.down, null);
    const noMemoryText = { ...DOWN, memory_text: null };
    assert.equal(parseOffer({ current: TWENTY, next: null, down: noMemoryText })?.down, null);
    assert.equal(parseOffer({ current: TWENTY, next: null, down: 'small' })?.down, null);
  });

  test('a way down without the peak in words has it empty', () => {
    const noPeakText: Partial<IResizeDown> = { ...DOWN };
    delete noPeakText.peak_text;
    const offer = parseOffer({ current: TWENTY, next: null, down: noPeakText });
    assert.deepEqual(offer?.down, { ...DOWN, peak_text: '' });
  });

  test('the panel line says what the session uses of its share and where it would go', () => {
    const offer = { current: TWENTY, next: null, reason: '', down: DOWN };
    assert.equal(
      downOffer(offer),
      'This session uses 3 GiB of its 20 GiB: move to A100 1g.5gb (5 GiB)?'
    );
    assert.equal(downLabel(DOWN), 'Move to a smaller GPU: A100 1g.5gb');
  });

  test('the confirmation says why, then what is saved, stopped and kept', () => {
    const text = downConfirmText({ current: TWENTY, next: null, reason: '', down: DOWN });
    assert.match(text, /^Its GPU memory peak so far is 3 GiB; A100 1g.5gb \(5 GiB\) holds that/);
    assert.match(text, /Every open notebook and file is saved/);
    assert.match(text, /A100 1g.5gb \(5 GiB\) instead of A100 3g.20gb \(20 GiB\)/);
    assert.match(text, /each idle kernel saves its variables first/);
  });
});
