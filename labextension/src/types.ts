/**
 * The JSON contract of the server extension (see docs/api.md).
 *
 * Sizes are bytes; times are ISO 8601 UTC strings.
 */

/** Where the server's GPU figures come from. */
export type GpuSource = 'nvml' | 'simulated' | 'unavailable';

/** Why NVML is unavailable, when it is. */
export type GpuErrorKind = 'no_driver' | 'gpu_lost' | 'not_supported' | 'no_permission' | 'unknown';

/** How a kernel's GPU memory was attributed to it. */
export type Attribution = 'exact' | 'size_unknown' | 'sole_candidate' | 'none';

/** What the gpuaas service's last reclaim cycle saw a GPU server doing. */
export type Activity = 'busy' | 'idle' | 'unknown';

/** The cycle's next step for a GPU server. */
export type ReclaimAction = 'warn' | 'wait' | 'reclaim' | 'clear-warning' | 'skip';

/** Why the cycle took that step (docs/culler.md). */
export type ReclaimCode =
  | 'demand'
  | 'always'
  | 'max-idle'
  | 'max-age'
  | 'no-policy'
  | 'starting'
  | 'stopping'
  | 'exempt'
  | 'snoozed'
  | 'busy'
  | 'unknown'
  | 'not-idle-yet'
  | 'no-demand'
  | 'placement';

/** A whole GPU or a MIG device. */
export interface IDevice {
  uuid: string;
  index: number | null;
  name: string;
  /** The parent GPU of a MIG device; null for a whole GPU. */
  parent_uuid: string | null;
  /** The MIG profile, such as `1g.10gb`; null for a whole GPU. */
  mig_profile: string | null;
  memory_total: number;
  memory_used: number;
  /** Percent, or null where NVML reports none (MIG devices). */
  utilization: number | null;
  /**
   * Shared with other pods. Time-shared: `memory_used` includes other users' processes. A
   * fraction (`cap` set): only the compute is shared; `memory_used` is this pod's alone.
   */
  shared: boolean;
  /** A memory-capped fraction of a GPU (HAMi); null for anything else. */
  cap: ICap | null;
}

/** The memory cap of a fraction, as the container sees it. */
export interface ICap {
  /** Bytes: what NVML reports as `memory_total` inside the container. */
  memory: number;
  /** Where the server read it, e.g. `CUDA_DEVICE_MEMORY_LIMIT_0`. */
  source: string | null;
  /** Who enforces it, e.g. `HAMi`. */
  enforced_by: string;
  /** The compute share in percent; null when not limited. */
  cores_percent: number | null;
}

/** A running kernel of this server and the GPU memory of its process tree. */
export interface IKernelUsage {
  kernel_id: string;
  name: string | null;
  path: string | null;
  session_type: string | null;
  execution_state: string | null;
  pids: number[];
  /** Sum of `by_device`; null when any part of it is unknown, 0 when the kernel holds nothing. */
  gpu_memory: number | null;
  /** Bytes per device UUID (whole GPU or MIG device); null where listed without a size. */
  by_device: Record<string, number | null>;
  attribution: Attribution;
}

/** `GET gpuaas/api/usage` */
export interface IUsage {
  source: GpuSource;
  /** Why NVML is unavailable; with a working source, what part of the read failed. */
  error: string | null;
  error_kind: GpuErrorKind | null;
  sampled_at: string;
  devices: IDevice[];
  kernels: IKernelUsage[];
  /**
   * Per device UUID, used memory that belongs to no kernel of this server; null when it
   * cannot be split (a kernel's size there is unknown, or the process list was not read).
   */
  other_memory: Record<string, number | null>;
}

/** One pending workload of the user (`GET gpuaas/api/queue`, see docs/queue.md). */
export interface IQueueItem {
  kind: 'notebook' | 'job' | 'workload';
  name: string;
  workload: string;
  namespace: string;
  local_queue: string;
  cluster_queue: string | null;
  /** 1-based; null while Kueue's visibility API has not placed it. */
  position_in_local_queue: number | null;
  position_in_cluster_queue: number | null;
  positions_known: boolean;
  offering: string | null;
  /** The catalog's name of the offering; null without a catalog (never show the slug). */
  offering_display_name: string | null;
  resources: Record<string, string>;
  pods: number;
  /** A fraction such as `1`, `1/7`. */
  gpu_equivalents: string;
  team: string;
  /** The catalog's name of the team; null when the service does not know it. */
  team_display_name: string | null;
  priority_class: string | null;
  waiting_since: string | null;
  waited_seconds: number | null;
  reason: string | null;
}

/** Admitted and pending workloads of one team. */
export interface IQueueTeam {
  team: string;
  /** The catalog's name of the team; null when the service does not know it. */
  display_name: string | null;
  admitted: number;
  pending: number;
  cluster_queues: { name: string; admitted: number; pending: number }[];
}

/** `GET gpuaas/api/queue` */
export interface IQueue {
  user: string | null;
  generated_at: string;
  synced: boolean;
  items: IQueueItem[];
  teams: IQueueTeam[];
  /** Why the queue cannot be shown (hub service down, Kueue unreachable), or null. */
  error: string | null;
  error_kind: string | null;
}
