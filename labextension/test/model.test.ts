import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  buildViewModel,
  capLevel,
  deviceTree,
  NEAR_CAP_FRACTION,
  otherMemory,
  parseUsage,
  PayloadError
} from '../src/model';

const GIB = 1024 ** 3;

/** A payload as docs/api.md describes it: two GPUs, the second split into MIG devices. */
function payload(): Record<string, unknown> {
  return {
    source: 'simulated',
    error: null,
    error_kind: null,
    sampled_at: '2026-11-30T16:40:00.123Z',
    devices: [
      {
        uuid: 'MIG-b',
        index: 1,
        name: 'MIG 1g.5gb',
        parent_uuid: 'GPU-1',
        mig_profile: '1g.5gb',
        memory_total: 5 * GIB,
        memory_used: GIB,
        utilization: null,
        shared: false
      },
      {
        uuid: 'GPU-1',
        index: 1,
        name: 'NVIDIA A100-SXM4-40GB',
        parent_uuid: null,
        mig_profile: null,
        memory_total: 40 * GIB,
        memory_used: GIB,
        utilization: null,
        shared: false
      },
      {
        uuid: 'MIG-a',
        index: 0,
        name: 'MIG 1g.5gb',
        parent_uuid: 'GPU-1',
        mig_profile: '1g.5gb',
        memory_total: 5 * GIB,
        memory_used: 0,
        utilization: null,
        shared: false
      },
      {
        uuid: 'GPU-0',
        index: 0,
        name: 'NVIDIA H100 80GB HBM3',
        parent_uuid: null,
        mig_profile: null,
        memory_total: 80 * GIB,
        memory_used: 8 * GIB,
        utilization: 37,
        shared: true
      }
    ],
    kernels: [
      {
        kernel_id: 'k-none',
        name: 'python3',
        path: null,
        session_type: null,
        execution_state: 'idle',
        pids: [3],
        gpu_memory: 0,
        by_device: {},
        attribution: 'none'
      },
      {
        kernel_id: 'k-b',
        name: 'python3',
        path: 'b.ipynb',
        session_type: 'notebook',
        execution_state: 'busy',
        pids: [2, 20],
        gpu_memory: 3 * GIB,
        by_device: { 'GPU-0': 2 * GIB, 'MIG-b': GIB },
        attribution: 'exact'
      },
      {
        kernel_id: 'k-a',
        name: 'python3',
        path: 'a.ipynb',
        session_type: 'notebook',
        execution_state: 'idle',
        pids: [1],
        gpu_memory: null,
        by_device: { 'GPU-0': null },
        attribution: 'size_unknown'
      }
    ],
    other_memory: { 'GPU-0': 6 * GIB, 'MIG-a': 0, 'MIG-b': 0 }
  };
}

describe('parseUsage', () => {
  test('accepts the documented payload', () => {
    const usage = parseUsage(payload());
    assert.equal(usage.source, 'simulated');
    assert.equal(usage.devices.length, 4);
    assert.equal(usage.kernels.length, 3);
    assert.equal(usage.other_memory['GPU-0'], 6 * GIB);
  });
  test('rejects what is not a usage payload', () => {
    assert.throws(() => parseUsage(null), PayloadError);
    assert.throws(() => parseUsage([]), PayloadError);
    assert.throws(() => parseUsage({ source: 'cuda' }), PayloadError);
    assert.throws(() => parseUsage({ ...payload(), devices: [{ name: 'no uuid' }] }), /uuid/);
  });
  test('keeps sizes that are unknown (null) apart from those that are wrong', () => {
    const usage = parseUsage(payload());
    const a = usage.kernels.find(k => k.kernel_id === 'k-a');
    assert.ok(a);
    assert.deepEqual(a.by_device, { 'GPU-0': null });
    assert.equal(a.gpu_memory, null);
    const split = parseUsage({ ...payload(), other_memory: { 'GPU-0': null, 'MIG-a': 'x' } });
    assert.deepEqual(split.other_memory, { 'GPU-0': null });
    assert.equal(otherMemory(split, 'GPU-0'), null);
    // A MIG-enabled GPU has no entry of its own: its memory is on its MIG devices.
    assert.equal(otherMemory(split, 'GPU-1'), 0);
  });
  test('fills in what an older or newer server leaves out', () => {
    const usage = parseUsage({
      source: 'nvml',
      kernels: [{ kernel_id: 'k', attribution: 'telepathy', by_device: { x: 'big' } }]
    });
    assert.deepEqual(usage.devices, []);
    assert.equal(usage.error, null);
    const kernel = usage.kernels[0];
    assert.ok(kernel);
    assert.equal(kernel.attribution, 'none');
    assert.deepEqual(kernel.by_device, {});
    assert.deepEqual(kernel.pids, []);
  });
});

describe('deviceTree', () => {
  test('nests MIG devices under their GPU, in index order', () => {
    const tree = deviceTree(parseUsage(payload()).devices);
    assert.deepEqual(
      tree.map(n => [n.device.uuid, n.children.map(c => c.device.uuid)]),
      [
        ['GPU-0', []],
        ['GPU-1', ['MIG-a', 'MIG-b']]
      ]
    );
    assert.equal(tree[1]?.children[0]?.parent?.uuid, 'GPU-1');
  });
  test('keeps a MIG device whose parent is not listed', () => {
    const devices = parseUsage(payload()).devices.filter(d => d.uuid !== 'GPU-1');
    assert.deepEqual(
      deviceTree(devices).map(n => n.device.uuid),
      ['GPU-0', 'MIG-a', 'MIG-b']
    );
  });
});

describe('buildViewModel', () => {
  test('kernel rows: by path, then kernels without one; devices resolved', () => {
    const model = buildViewModel(parseUsage(payload()));
    assert.deepEqual(
      model.kernels.map(k => k.kernel.kernel_id),
      ['k-a', 'k-b', 'k-none']
    );
    const b = model.kernels[1];
    assert.ok(b);
    assert.deepEqual(
      b.devices.map(d => [d.device.uuid, d.bytes, d.parent?.uuid]),
      [
        ['GPU-0', 2 * GIB, undefined],
        ['MIG-b', GIB, 'GPU-1']
      ]
    );
  });
  test("takes a kernel's path from the open sessions when the payload has none", () => {
    const sessions = new Map([['k-none', { path: 'c.ipynb', type: 'console', name: 'c' }]]);
    const model = buildViewModel(parseUsage(payload()), sessions);
    const row = model.kernels.find(k => k.kernel.kernel_id === 'k-none');
    assert.ok(row);
    assert.equal(row.path, 'c.ipynb');
    assert.equal(row.sessionType, 'console');
  });
  test('other memory: devices with some, and every shared device', () => {
    const usage = parseUsage(payload());
    assert.deepEqual(
      buildViewModel(usage).other.map(o => [o.device.uuid, o.bytes]),
      [['GPU-0', 6 * GIB]]
    );
    usage.other_memory['MIG-b'] = null;
    assert.deepEqual(
      buildViewModel(usage).other.map(o => [o.device.uuid, o.bytes]),
      [
        ['GPU-0', 6 * GIB],
        ['MIG-b', null]
      ]
    );
    usage.other_memory['MIG-b'] = 0;
    usage.other_memory['GPU-0'] = 0;
    assert.deepEqual(
      buildViewModel(usage).other.map(o => [o.device.uuid, o.bytes]),
      [['GPU-0', 0]]
    );
    const gpu0 = usage.devices.find(d => d.uuid === 'GPU-0');
    assert.ok(gpu0);
    gpu0.shared = false;
    assert.deepEqual(buildViewModel(usage).other, []);
  });
});

/** A HAMi fraction: a 6 GiB cap on an L4, as the server reports it inside the container. */
function fractionPayload(kernelBytes: number[], used?: number): Record<string, unknown> {
  const byKernel = kernelBytes.map((bytes, i) => ({
    kernel_id: `k${String(i)}`,
    name: 'python3',
    path: `nb${String(i)}.ipynb`,
    session_type: 'notebook',
    execution_state: 'idle',
    pids: [100 + i],
    gpu_memory: bytes,
    by_device: { 'GPU-L4': bytes },
    attribution: 'exact'
  }));
  const total = kernelBytes.reduce((a, b) => a + b, 0);
  return {
    source: 'simulated',
    error: null,
    error_kind: null,
    sampled_at: '2026-12-01T00:00:00Z',
    devices: [
      {
        uuid: 'GPU-L4',
        index: 0,
        name: 'NVIDIA L4',
        parent_uuid: null,
        mig_profile: null,
        memory_total: 6 * GIB,
        memory_used: used ?? total,
        utilization: 40,
        shared: true,
        cap: {
          memory: 6 * GIB,
          source: 'CUDA_DEVICE_MEMORY_LIMIT_0',
          enforced_by: 'HAMi',
          cores_percent: 25
        }
      }
    ],
    kernels: byKernel,
    other_memory: { 'GPU-L4': (used ?? total) - total }
  };
}

describe('fractions', () => {
  test('the cap is parsed with its source; a device without one has null', () => {
    const usage = parseUsage(fractionPayload([GIB]));
    assert.deepEqual(usage.devices[0]?.cap, {
      memory: 6 * GIB,
      source: 'CUDA_DEVICE_MEMORY_LIMIT_0',
      enforced_by: 'HAMi',
      cores_percent: 25
    });
    assert.equal(parseUsage(payload()).devices[0]?.cap, null);
  });

  test('a cap without a positive size is no cap', () => {
    const raw = fractionPayload([GIB]);
    const [first] = raw.devices as Record<string, unknown>[];
    assert.ok(first);
    first.cap = { memory: 0, source: 'X' };
    assert.equal(parseUsage(raw).devices[0]?.cap, null);
  });

  test('capLevel: nothing below the threshold, near from it, full at the cap', () => {
    const cap = 10 * GIB;
    assert.equal(NEAR_CAP_FRACTION, 0.9);
    assert.equal(capLevel(8.9 * GIB, cap), null);
    assert.equal(capLevel(9 * GIB, cap), 'near');
    assert.equal(capLevel(cap, cap), 'full');
    assert.equal(capLevel(null, cap), null);
    assert.equal(capLevel(GIB, 0), null);
  });

  test('no warning while every kernel and the device are well under the cap', () => {
    const model = buildViewModel(parseUsage(fractionPayload([GIB, 2 * GIB])));
    assert.deepEqual(model.capWarnings, []);
  });

  test('a kernel near the cap is warned about by name, with its bytes', () => {
    const model = buildViewModel(parseUsage(fractionPayload([5.5 * GIB])));
    assert.equal(model.capWarnings.length, 1);
    const warning = model.capWarnings[0];
    assert.ok(warning);
    assert.equal(warning.kernel?.path, 'nb0.ipynb');
    assert.equal(warning.bytes, 5.5 * GIB);
    assert.equal(warning.level, 'near');
  });

  test('kernels that each stay under the cap but add up to it warn for the device', () => {
    const model = buildViewModel(parseUsage(fractionPayload([3 * GIB, 3 * GIB])));
    assert.equal(model.capWarnings.length, 1);
    assert.equal(model.capWarnings[0]?.kernel, null);
    assert.equal(model.capWarnings[0]?.level, 'full');
  });

  test('a fraction has no standing "other users" row: its used memory is this pod\'s', () => {
    assert.deepEqual(buildViewModel(parseUsage(fractionPayload([GIB]))).other, []);
    // Memory of this pod outside its kernels is still listed.
    const model = buildViewModel(parseUsage(fractionPayload([GIB], 2 * GIB)));
    assert.equal(model.other[0]?.bytes, GIB);
  });
});
