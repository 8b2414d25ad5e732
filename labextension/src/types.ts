/**
 * The JSON contract of the server extension (see docs/api.md): the answers' types are aliases of
 * those openapi-typescript generates from its OpenAPI document (extensionApi.ts).
 *
 * Sizes are bytes; times are ISO 8601 UTC strings.
 */

import type { components } from './extensionApi';

/** Where the server's GPU figures come from. */
export type GpuSource = components['schemas']['gpu_source'];

/** Why NVML is unavailable, when it is. */
export type GpuErrorKind = components['schemas']['gpu_error_kind'];

/** How a kernel's GPU memory was attributed to it. */
export type Attribution = components['schemas']['attribution'];

/** What the gpuaas service's last reclaim cycle saw a GPU server doing. */
export type Activity = components['schemas']['service_activity_state'];

/** The cycle's next step for a GPU server. */
export type ReclaimAction = components['schemas']['service_reclaim_action'];

/** Why the cycle took that step (docs/culler.md). */
export type ReclaimCode = components['schemas']['service_reclaim_code'];

/** A whole GPU or a MIG device. */
export type IDevice = components['schemas']['device'];

/** The memory cap of a fraction, as the container sees it. */
export type ICap = components['schemas']['cap'];

/** A running kernel of this server and the GPU memory of its process tree. */
export type IKernelUsage = components['schemas']['kernel_usage'];

/** `GET gpuaas/api/usage` */
export type IUsage = components['schemas']['usage'];

/** One pending workload of the user (`GET gpuaas/api/queue`, see docs/queue.md). */
export type IQueueItem = components['schemas']['queue_item'];

/** Admitted and pending workloads of one team. */
export type IQueueTeam = components['schemas']['queue_team'];

/** `GET gpuaas/api/queue` */
export type IQueue = components['schemas']['queue'];
