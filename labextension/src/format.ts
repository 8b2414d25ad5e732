/**
 * Pure helpers that turn the server's figures into words; no DOM, no I/O.
 */
import type { Attribution, ICap, IDevice, IUsage } from './types';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/**
 * A size in bytes in binary units: `0 B`, `512 MiB`, `2.0 GiB`, `80 GiB`.
 *
 * One decimal below 10 units, none from 10 on.
 */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes <= 0) {
    return '0 B';
  }
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) {
    return `${String(Math.round(value))} B`;
  }
  // 1023.96 MiB would print as "1024 MiB": move up a unit instead.
  if (Math.round(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const digits = value < 10 ? 1 : 0;
  return `${value.toFixed(digits)} ${UNITS[unit] ?? ''}`;
}

/** `used` as a percentage of `total`, from 0 to 100; 0 when the total is unknown. */
export function percentOf(used: number, total: number): number {
  if (!(total > 0) || !(used > 0)) {
    return 0;
  }
  return Math.min(100, (used / total) * 100);
}

/** A percentage for people: `0%`, `<1%`, `37%`. */
export function formatPercent(percent: number): string {
  if (percent <= 0) {
    return '0%';
  }
  if (percent < 1) {
    return '<1%';
  }
  return `${String(Math.round(percent))}%`;
}

/**
 * A UUID short enough for a narrow sidebar: `GPU-8a1f3c2e…`, `MIG-5c0d9e21…`.
 * The prefix (`GPU-`, `MIG-`) is kept; the full UUID belongs in a title attribute.
 */
export function shortenUuid(uuid: string, keep = 8): string {
  const match = /^([A-Za-z]+-)(.*)$/.exec(uuid);
  const prefix = match?.[1] ?? '';
  const rest = match?.[2] ?? uuid;
  if (rest.length <= keep + 1) {
    return uuid;
  }
  return `${prefix}${rest.slice(0, keep)}…`;
}

/** How a kernel's memory was attributed, in words. */
export function attributionLabel(attribution: Attribution): string {
  switch (attribution) {
    case 'exact':
      return 'exact by PID';
    case 'size_unknown':
      return 'using the GPU, size unknown';
    case 'sole_candidate':
      return 'sole candidate';
    case 'none':
      return 'no GPU memory';
  }
}

/** The longer explanation of an attribution, for a tooltip. */
export function attributionDescription(attribution: Attribution): string {
  switch (attribution) {
    case 'exact':
      return "NVML lists processes of this kernel's process tree with their memory.";
    case 'size_unknown':
      return (
        "NVML lists processes of this kernel's process tree but reports no memory for " +
        'them (drivers 535.113 to 560 inside a container).'
      );
    case 'sole_candidate':
      return (
        "NVML's process IDs match no process of this server (host PIDs); this kernel " +
        'was the only possible owner.'
      );
    case 'none':
      return 'No GPU memory was found for this kernel or its child processes.';
  }
}

/** The text of the source badge: `NVML`, `simulated` or `unavailable: <why>`. */
export function sourceLabel(usage: Pick<IUsage, 'source' | 'error' | 'error_kind'>): string {
  switch (usage.source) {
    case 'nvml':
      return 'NVML';
    case 'simulated':
      return 'simulated';
    case 'unavailable':
      return `unavailable: ${usage.error ?? errorKindLabel(usage.error_kind)}`;
  }
}

/** Why NVML is unavailable, in words, for when the server sent no message. */
export function errorKindLabel(kind: IUsage['error_kind']): string {
  switch (kind) {
    case 'no_driver':
      return 'no NVIDIA driver';
    case 'gpu_lost':
      return 'GPU lost';
    case 'not_supported':
      return 'not supported';
    case 'no_permission':
      return 'no permission';
    case 'unknown':
    case null:
      return 'unknown error';
  }
}

/**
 * A short name of a device that tells it apart from the others on this server:
 * `GPU 0`, `GPU 2 · MIG 1g.5gb #3`.
 */
export function deviceShortName(device: IDevice, parent?: IDevice): string {
  const gpu =
    device.index === null || device.parent_uuid !== null ? null : `GPU ${String(device.index)}`;
  if (device.parent_uuid === null) {
    return gpu ?? device.name;
  }
  const parentName =
    parent === undefined ? shortenUuid(device.parent_uuid) : deviceShortName(parent);
  const profile = device.mig_profile ?? 'MIG';
  const index = device.index === null ? '' : ` #${String(device.index)}`;
  return `${parentName} · MIG ${profile}${index}`;
}

/** The time of day of an ISO timestamp in the user's locale, or the text as given. */
export function formatTime(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return iso;
  }
  return date.toLocaleTimeString();
}

/** The last part of a path: `train.ipynb` for `projects/a/train.ipynb`. */
export function basename(path: string): string {
  const parts = path.split('/');
  return parts[parts.length - 1] ?? path;
}

/**
 * Where a fraction's memory limit comes from:
 * `cap 6.0 GiB from HAMi (CUDA_DEVICE_MEMORY_LIMIT_0)`.
 */
export function capLabel(cap: ICap): string {
  const source = cap.source === null ? '' : ` (${cap.source})`;
  return `cap ${formatBytes(cap.memory)} from ${cap.enforced_by}${source}`;
}

/** A fraction's compute share: `25% of the GPU's compute`, or null when not limited. */
export function coresLabel(cap: ICap): string | null {
  return cap.cores_percent === null
    ? null
    : `${String(Math.round(cap.cores_percent))}% of the GPU's compute`;
}

/**
 * The warning for a kernel (or, with `who` null, the device) near a fraction's cap:
 * `train.ipynb: 5.6 GiB of its 6.0 GiB cap`.
 */
export function capWarningText(
  who: string | null,
  deviceName: string,
  bytes: number,
  cap: ICap,
  level: 'near' | 'full'
): string {
  const subject = who ?? `${deviceName} in all`;
  const figure = `${formatBytes(bytes)} of its ${formatBytes(cap.memory)} cap`;
  const outcome =
    level === 'full'
      ? `at the cap: the next GPU allocation fails with "out of memory" (${cap.enforced_by} enforces it)`
      : 'near the cap: an allocation beyond it fails with "out of memory"';
  return `${subject}: ${figure}, ${outcome}.`;
}
