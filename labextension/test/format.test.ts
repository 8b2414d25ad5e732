import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  attributionLabel,
  capLabel,
  capWarningText,
  coresLabel,
  deviceShortName,
  formatBytes,
  formatPercent,
  percentOf,
  shortenUuid,
  sourceLabel
} from '../src/format';
import type { Attribution, ICap, IDevice } from '../src/types';

const GIB = 1024 ** 3;

function device(overrides: Partial<IDevice> = {}): IDevice {
  return {
    uuid: 'GPU-8a1f3c2e-0000-0000-0000-000000000000',
    index: 0,
    name: 'NVIDIA H100 80GB HBM3',
    parent_uuid: null,
    mig_profile: null,
    memory_total: 80 * GIB,
    memory_used: 0,
    utilization: 0,
    shared: false,
    cap: null,
    ...overrides
  };
}

describe('formatBytes', () => {
  const cases: [number, string][] = [
    [0, '0 B'],
    [-5, '0 B'],
    [Number.NaN, '0 B'],
    [512, '512 B'],
    [1024, '1.0 KiB'],
    [512 * 1024 ** 2, '512 MiB'],
    [2 * GIB, '2.0 GiB'],
    [1.25 * GIB, '1.3 GiB'],
    [10 * GIB, '10 GiB'],
    [80 * GIB, '80 GiB'],
    [1024 ** 3 - 1, '1.0 GiB'],
    [2 * 1024 ** 4, '2.0 TiB']
  ];
  for (const [bytes, expected] of cases) {
    test(`${String(bytes)} bytes is ${expected}`, () => {
      assert.equal(formatBytes(bytes), expected);
    });
  }
});

describe('percentages', () => {
  test('percentOf is bounded and safe with a zero total', () => {
    assert.equal(percentOf(3 * GIB, 80 * GIB), 3.75);
    assert.equal(percentOf(1, 0), 0);
    assert.equal(percentOf(200, 100), 100);
  });
  test('formatPercent shows small values as <1%', () => {
    assert.equal(formatPercent(0), '0%');
    assert.equal(formatPercent(0.4), '<1%');
    assert.equal(formatPercent(37.4), '37%');
  });
});

describe('shortenUuid', () => {
  test('keeps the prefix and eight characters', () => {
    assert.equal(shortenUuid('GPU-8a1f3c2e-1111-2222-3333-444455556666'), 'GPU-8a1f3c2e…');
    assert.equal(shortenUuid('MIG-5c0d9e21-aaaa-bbbb'), 'MIG-5c0d9e21…');
  });
  test('leaves short identifiers alone', () => {
    assert.equal(shortenUuid('GPU-1234'), 'GPU-1234');
  });
});

describe('words', () => {
  test('each attribution in words', () => {
    const words: Record<Attribution, string> = {
      exact: 'exact by PID',
      size_unknown: 'using the GPU, size unknown',
      sole_candidate: 'sole candidate',
      none: 'no GPU memory'
    };
    for (const [attribution, label] of Object.entries(words)) {
      assert.equal(attributionLabel(attribution as Attribution), label);
    }
  });
  test('the source badge', () => {
    assert.equal(sourceLabel({ source: 'nvml', error: null, error_kind: null }), 'NVML');
    assert.equal(sourceLabel({ source: 'simulated', error: null, error_kind: null }), 'simulated');
    assert.equal(
      sourceLabel({ source: 'unavailable', error: 'Driver Not Loaded', error_kind: 'no_driver' }),
      'unavailable: Driver Not Loaded'
    );
    assert.equal(
      sourceLabel({ source: 'unavailable', error: null, error_kind: 'gpu_lost' }),
      'unavailable: GPU lost'
    );
  });
  test('device names tell GPUs and MIG devices apart', () => {
    const gpu = device({ index: 2, name: 'NVIDIA A100-SXM4-40GB' });
    const mig = device({
      uuid: 'MIG-1',
      index: 3,
      parent_uuid: gpu.uuid,
      mig_profile: '1g.5gb',
      utilization: null
    });
    assert.equal(deviceShortName(gpu), 'GPU 2');
    assert.equal(deviceShortName(mig, gpu), 'GPU 2 · MIG 1g.5gb #3');
    assert.equal(deviceShortName(mig), 'GPU-8a1f3c2e… · MIG 1g.5gb #3');
    assert.equal(deviceShortName(device({ index: null })), 'NVIDIA H100 80GB HBM3');
  });
});

describe('fraction caps in words', () => {
  const cap: ICap = {
    memory: 6 * GIB,
    source: 'CUDA_DEVICE_MEMORY_LIMIT_0',
    enforced_by: 'HAMi',
    cores_percent: 25
  };

  test('the cap says its size, who enforces it and where it was read', () => {
    assert.equal(capLabel(cap), 'cap 6.0 GiB from HAMi (CUDA_DEVICE_MEMORY_LIMIT_0)');
    assert.equal(capLabel({ ...cap, source: null }), 'cap 6.0 GiB from HAMi');
  });

  test('the compute share, or nothing when not limited', () => {
    assert.equal(coresLabel(cap), "25% of the GPU's compute");
    assert.equal(coresLabel({ ...cap, cores_percent: null }), null);
  });

  test('a warning names the kernel, its use against the cap and what happens next', () => {
    assert.equal(
      capWarningText('train.ipynb', 'GPU 0', 5.6 * GIB, cap, 'near'),
      'train.ipynb: 5.6 GiB of its 6.0 GiB cap, near the cap: an allocation beyond it fails ' +
        'with "out of memory".'
    );
    assert.match(
      capWarningText(null, 'GPU 0', 6 * GIB, cap, 'full'),
      /^GPU 0 in all: 6\.0 GiB of its 6\.0 GiB cap, at the cap: the next GPU allocation fails/
    );
  });
});
