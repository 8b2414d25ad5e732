/**
 * The panel's view model: the server's payload checked and arranged for display.
 * Pure functions of plain data; no DOM, no I/O.
 */
import type { Attribution, GpuSource, ICap, IDevice, IKernelUsage, IUsage } from './types';
import { isRecord } from './guards';

/** What the app's sessions manager knows about a kernel's session. */
export interface ISessionInfo {
  path: string;
  type: string;
  name: string;
}

/** A device and, for a MIG-enabled GPU, its MIG devices. */
export interface IDeviceNode {
  device: IDevice;
  parent?: IDevice;
  children: IDeviceNode[];
}

/** One kernel row. */
export interface IKernelRow {
  kernel: IKernelUsage;
  /** The notebook or console path: the payload's, else the open session's. */
  path: string | null;
  /** `notebook`, `console`, ... or null when the kernel has no session. */
  sessionType: string | null;
  /**
   * Per device, the kernel's bytes (null: listed without a size) with the device it is on;
   * devices the payload does not list are left out.
   */
  devices: { device: IDevice; parent?: IDevice; bytes: number | null }[];
}

/** One line of the "other memory" section. */
export interface IOtherRow {
  device: IDevice;
  parent?: IDevice;
  /** Null when the device's memory cannot be split between kernels and others. */
  bytes: number | null;
}

/** A kernel, or the whole device, near a fraction's memory cap. */
export interface ICapWarning {
  device: IDevice;
  parent?: IDevice;
  cap: ICap;
  /** The kernel near the cap; null when it is the device's use as a whole. */
  kernel: IKernelRow | null;
  bytes: number;
  /** `full`: at the cap (the next allocation fails); `near`: at NEAR_CAP_FRACTION of it. */
  level: 'near' | 'full';
}

export interface IViewModel {
  usage: IUsage;
  tree: IDeviceNode[];
  kernels: IKernelRow[];
  other: IOtherRow[];
  capWarnings: ICapWarning[];
}

/** The share of a fraction's cap from which the panel warns (90%). */
export const NEAR_CAP_FRACTION = 0.9;

/** How close `bytes` is to a cap: null below NEAR_CAP_FRACTION of it. */
export function capLevel(bytes: number | null, cap: number): 'near' | 'full' | null {
  if (bytes === null || !(cap > 0)) {
    return null;
  }
  if (bytes >= cap) {
    return 'full';
  }
  return bytes >= NEAR_CAP_FRACTION * cap ? 'near' : null;
}

const SOURCES: readonly GpuSource[] = ['nvml', 'simulated', 'unavailable'];
const ATTRIBUTIONS: readonly Attribution[] = ['exact', 'size_unknown', 'sole_candidate', 'none'];
const ERROR_KINDS: readonly NonNullable<IUsage['error_kind']>[] = [
  'no_driver',
  'gpu_lost',
  'not_supported',
  'no_permission',
  'unknown'
];

/** Thrown when the server's answer does not follow docs/api.md. */
export class PayloadError extends Error {
  constructor(message: string) {
    super(`unexpected answer from gpuaas/api/usage: ${message}`);
    this.name = 'PayloadError';
  }
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** Bytes by device UUID; null (unknown) is kept, anything else that is not a number dropped. */
function sizes(value: unknown): Record<string, number | null> {
  const result: Record<string, number | null> = {};
  if (isRecord(value)) {
    for (const [key, bytes] of Object.entries(value)) {
      const n = num(bytes);
      if (n !== null || bytes === null) {
        result[key] = n;
      }
    }
  }
  return result;
}

function parseDevice(raw: unknown, where: string): IDevice {
  if (!isRecord(raw)) {
    throw new PayloadError(`${where} is not an object`);
  }
  const uuid = str(raw.uuid);
  if (uuid === null) {
    throw new PayloadError(`${where}.uuid is missing`);
  }
  return {
    uuid,
    index: num(raw.index),
    name: str(raw.name) ?? uuid,
    parent_uuid: str(raw.parent_uuid),
    mig_profile: str(raw.mig_profile),
    memory_total: num(raw.memory_total) ?? 0,
    memory_used: num(raw.memory_used) ?? 0,
    utilization: num(raw.utilization),
    shared: raw.shared === true,
    cap: parseCap(raw.cap)
  };
}

/** A fraction's cap; null when absent or without a positive size. */
function parseCap(raw: unknown): ICap | null {
  if (!isRecord(raw)) {
    return null;
  }
  const memory = num(raw.memory);
  if (memory === null || memory <= 0) {
    return null;
  }
  return {
    memory,
    source: str(raw.source),
    enforced_by: str(raw.enforced_by) ?? 'HAMi',
    cores_percent: num(raw.cores_percent)
  };
}

function parseKernel(raw: unknown, where: string): IKernelUsage {
  if (!isRecord(raw)) {
    throw new PayloadError(`${where} is not an object`);
  }
  const kernelId = str(raw.kernel_id);
  if (kernelId === null) {
    throw new PayloadError(`${where}.kernel_id is missing`);
  }
  const attribution = str(raw.attribution) as Attribution | null;
  return {
    kernel_id: kernelId,
    name: str(raw.name),
    path: str(raw.path),
    session_type: str(raw.session_type),
    execution_state: str(raw.execution_state),
    pids: Array.isArray(raw.pids) ? raw.pids.filter((p): p is number => typeof p === 'number') : [],
    gpu_memory: num(raw.gpu_memory),
    by_device: sizes(raw.by_device),
    attribution: attribution !== null && ATTRIBUTIONS.includes(attribution) ? attribution : 'none'
  };
}

/**
 * Check the `usage` payload and fill in what an older or newer server may leave out.
 *
 * @throws {PayloadError} when it is not a usage payload at all
 */
export function parseUsage(raw: unknown): IUsage {
  if (!isRecord(raw)) {
    throw new PayloadError('not a JSON object');
  }
  const source = str(raw.source) as GpuSource | null;
  if (source === null || !SOURCES.includes(source)) {
    throw new PayloadError(`unknown source ${String(raw.source)}`);
  }
  const devices = Array.isArray(raw.devices) ? raw.devices : [];
  const kernels = Array.isArray(raw.kernels) ? raw.kernels : [];
  const errorKind = str(raw.error_kind) as IUsage['error_kind'];
  return {
    source,
    error: str(raw.error),
    error_kind: errorKind !== null && ERROR_KINDS.includes(errorKind) ? errorKind : null,
    sampled_at: str(raw.sampled_at) ?? new Date().toISOString(),
    devices: devices.map((d, i) => parseDevice(d, `devices[${String(i)}]`)),
    kernels: kernels.map((k, i) => parseKernel(k, `kernels[${String(i)}]`)),
    other_memory: sizes(raw.other_memory)
  };
}

function byIndexThenUuid(a: IDevice, b: IDevice): number {
  const ai = a.index ?? Number.MAX_SAFE_INTEGER;
  const bi = b.index ?? Number.MAX_SAFE_INTEGER;
  return ai - bi || a.uuid.localeCompare(b.uuid);
}

/** Whole GPUs at the top, each MIG device under its parent (or at the top if its parent is not listed). */
export function deviceTree(devices: readonly IDevice[]): IDeviceNode[] {
  const byUuid = new Map(devices.map(d => [d.uuid, d]));
  const sorted = [...devices].sort(byIndexThenUuid);
  const nodes = new Map<string, IDeviceNode>();
  for (const device of sorted) {
    const parent = device.parent_uuid === null ? undefined : byUuid.get(device.parent_uuid);
    nodes.set(device.uuid, { device, parent, children: [] });
  }
  const roots: IDeviceNode[] = [];
  for (const device of sorted) {
    const node = nodes.get(device.uuid);
    if (node === undefined) {
      continue;
    }
    const parentNode = device.parent_uuid === null ? undefined : nodes.get(device.parent_uuid);
    if (parentNode !== undefined && parentNode !== node) {
      parentNode.children.push(node);
    } else {
      roots.push(node);
    }
  }
  return roots;
}

/**
 * The memory on a device that belongs to no kernel here: 0 for a device the payload gives
 * none for (a MIG-enabled GPU, whose memory is on its MIG devices), null when unknown.
 */
export function otherMemory(usage: IUsage, uuid: string): number | null {
  return Object.prototype.hasOwnProperty.call(usage.other_memory, uuid)
    ? (usage.other_memory[uuid] ?? null)
    : 0;
}

/**
 * Arrange one payload for display.
 *
 * @param usage - the checked payload
 * @param sessions - the app's open sessions by kernel id, for kernels the payload gives no path
 */
export function buildViewModel(
  usage: IUsage,
  sessions: ReadonlyMap<string, ISessionInfo> = new Map()
): IViewModel {
  const byUuid = new Map(usage.devices.map(d => [d.uuid, d]));
  const parentOf = (d: IDevice): IDevice | undefined =>
    d.parent_uuid === null ? undefined : byUuid.get(d.parent_uuid);

  const kernels: IKernelRow[] = usage.kernels.map(kernel => {
    const session = sessions.get(kernel.kernel_id);
    const devices = Object.entries(kernel.by_device)
      .map(([uuid, bytes]) => ({ device: byUuid.get(uuid), bytes }))
      .filter((e): e is { device: IDevice; bytes: number | null } => e.device !== undefined)
      .map(e => ({ ...e, parent: parentOf(e.device) }))
      .sort((a, b) => byIndexThenUuid(a.device, b.device));
    return {
      kernel,
      path: kernel.path ?? session?.path ?? null,
      sessionType: kernel.session_type ?? session?.type ?? null,
      devices
    };
  });
  kernels.sort((a, b) => {
    if (a.path !== null && b.path !== null) {
      return a.path.localeCompare(b.path) || a.kernel.kernel_id.localeCompare(b.kernel.kernel_id);
    }
    if (a.path !== null) {
      return -1;
    }
    if (b.path !== null) {
      return 1;
    }
    return a.kernel.kernel_id.localeCompare(b.kernel.kernel_id);
  });

  const other: IOtherRow[] = [...usage.devices]
    .sort(byIndexThenUuid)
    .map(device => ({
      device,
      parent: parentOf(device),
      bytes: otherMemory(usage, device.uuid)
    }))
    // Unknown amounts are listed, and every time-shared device: its note about other users
    // matters even at 0 (a fraction's used memory is this pod's alone: no such note).
    .filter(
      row => row.bytes === null || row.bytes > 0 || (row.device.shared && row.device.cap === null)
    );

  return {
    usage,
    tree: deviceTree(usage.devices),
    kernels,
    other,
    capWarnings: capWarnings(usage, kernels)
  };
}

/** Each kernel whose use of `device` is near its cap. */
function kernelCapWarnings(
  device: ICapWarning['device'],
  parent: ICapWarning['parent'],
  cap: ICapWarning['cap'],
  kernels: readonly IKernelRow[]
): ICapWarning[] {
  const warnings: ICapWarning[] = [];
  for (const row of kernels) {
    const bytes = row.devices.find(d => d.device.uuid === device.uuid)?.bytes ?? null;
    const level = capLevel(bytes, cap.memory);
    if (bytes !== null && level !== null) {
      warnings.push({ device, parent, cap, kernel: row, bytes, level });
    }
  }
  return warnings;
}

/**
 * For every fraction whose cap is near: each kernel near it, or else the device as a whole
 * (several kernels, or processes outside them, that add up to it).
 */
export function capWarnings(usage: IUsage, kernels: readonly IKernelRow[]): ICapWarning[] {
  const warnings: ICapWarning[] = [];
  const byUuid = new Map(usage.devices.map(d => [d.uuid, d]));
  for (const device of [...usage.devices].sort(byIndexThenUuid)) {
    const cap = device.cap;
    if (cap === null) {
      continue;
    }
    const parent = device.parent_uuid === null ? undefined : byUuid.get(device.parent_uuid);
    const forKernels = kernelCapWarnings(device, parent, cap, kernels);
    const level = capLevel(device.memory_used, cap.memory);
    if (forKernels.length === 0 && level !== null) {
      warnings.push({ device, parent, cap, kernel: null, bytes: device.memory_used, level });
    }
    warnings.push(...forKernels);
  }
  return warnings;
}
