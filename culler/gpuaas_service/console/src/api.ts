/**
 * The console's API answers (docs/console.md) and the one way the page asks for them.
 * The shapes are the API schema's (jupyter_gpuaas/server/api-schema.json, the service_* definitions):
 * `make lint` checks every interface and type here against it, field by field.
 */

import type { Activity, ReclaimAction, ReclaimCode } from '../../../../labextension/src/types.js';

export type { Activity, ReclaimAction, ReclaimCode };

/** How many GPU workbenches get each action ({} before the first cycle). */
export interface IActionCounts {
  warn?: number;
  wait?: number;
  reclaim?: number;
  'clear-warning'?: number;
  skip?: number;
}

/** A flavor row's five amounts, each written in one way. */
export interface IAmounts {
  nominal: string;
  notebooks: string;
  training: string;
  borrowed: string;
  lent: string;
}

export interface IFlavorRow {
  flavor: string;
  resource: string;
  /** Kueue's integer units of the resource. */
  nominal: number;
  notebooks: number;
  training: number;
  borrowed: number;
  lent: number;
  /** Kubernetes quantities, as Kueue counts. */
  shown: IAmounts;
  /** In the units a person reads: GiB, % of a GPU, GPUs, MIG slices, shares. */
  readable: IAmounts;
  /** GPU-equivalents, where the resource has a known size ("0" otherwise). */
  gpu_eq: IAmounts;
  /** Something is used, borrowed or lent (rows without are folded away). */
  in_use: boolean;
}

export interface IHours {
  allocated_hours: number;
  busy_hours: number;
  idle_hours: number;
  /** The team's servers reclaimed today. */
  reclaims: number;
  /** Admitted workbench pods that ended without ever being Ready, today. */
  failed_starts: number;
}

export interface ITeam {
  team: string;
  cluster_queues: string[];
  flavors: IFlavorRow[];
  queued: { workloads: number; gpu_equivalents: string; oldest_wait_seconds: number | null };
  now: { servers: number; allocated: string; busy: string; idle: string; unknown: string };
  today: IHours;
}

export interface IWorkbench {
  key: string;
  user: string;
  server: string;
  team: string;
  offering: string;
  kind: string;
  gpu_equivalents: string;
  started_at: string;
  age_seconds: number;
  phase: string;
  activity: Activity;
  signal: string;
  idle_seconds: number | null;
  unknown_seconds: number | null;
  policy: string | null;
  action: ReclaimAction;
  code: ReclaimCode;
  reason: string;
  reclaim_at: string | null;
  warned_at: string | null;
  handoff: string | null;
  snoozes_left: number | null;
  dry_run: boolean;
}

export interface IHandoff {
  workload: string;
  cluster_queue: string;
  team: string;
  reclaimed_at: string;
  admitted_at: string | null;
  latency_seconds: number | null;
  status: 'waiting' | 'succeeded' | 'failed';
  reason: string;
}

export interface IEvent {
  at: string;
  event: 'warn' | 'snooze' | 'reclaim' | 'lent' | 'handoff';
  result: '' | 'succeeded' | 'failed' | 'gone';
  reason: string;
  user: string;
  server: string;
  team: string;
  offering: string;
  gpu_equivalents: string;
  workload: string;
  latency_seconds: number | null;
  returned_after_seconds: number | null;
  regret: boolean;
  dry_run: boolean;
}

export interface IRegret {
  reclaims: number;
  returned_within_window: number;
  window_seconds: number;
}

export interface IPolicyInForce {
  file?: string | null;
  error?: string;
  in_force: string;
}

export interface IConsole {
  now: string;
  decided_at: string | null;
  last_completed: string | null;
  last_error: string;
  synced: boolean;
  reclaim: 'on' | 'off';
  visible_teams: string[] | null;
  policy: IPolicyInForce;
  teams: ITeam[];
  workbenches: IWorkbench[];
  events: IEvent[];
  handoffs: IHandoff[];
  regret: IRegret | null;
  summary: IActionCounts;
}

export interface IGpuRow {
  key: string;
  /** "" where the service does not know it; several nodes comma-separated (training). */
  node: string;
  pool: string[];
  kind: 'gpu' | 'mig' | 'shared' | 'fraction' | 'training';
  device: string;
  uuids: string[];
  holder: string;
  holder_kind: 'workbench' | 'training' | 'free';
  team: string;
  offering: string;
  gpu_equivalents: string;
  since: string | null;
  state: Activity | 'training' | 'free';
  idle_since: string | null;
  memory_bytes: number | null;
  memory_cap_bytes: number | null;
  utilization_percent: number | null;
  next_step: ReclaimAction | '';
}

export interface IGpuNode {
  node: string;
  holdings: number;
  idle: number;
  pools: string[];
  gpu_equivalents: string;
  /** What is free on it ("0" where the service reads no Node objects). */
  free_gpu_equivalents: string;
}

export interface IGpus {
  now: string;
  /** When the last cycle read what this shows (one moment); null before a cycle. */
  as_of: string | null;
  visible_teams: string[] | null;
  nodes: IGpuNode[];
  devices: IGpuRow[];
}

export interface IFitRow {
  key: string;
  user: string;
  offering: string;
  offering_name: string;
  gpu_equivalents: string;
  sessions: number;
  peak_bytes: number | null;
  peak: string | null;
  advised: string | null;
  advised_name: string | null;
  reason: string;
  measured: boolean;
  frees: string;
}

export interface IFitTeam {
  team: string;
  frees: string;
  users: IFitRow[];
}

export interface IFit {
  catalog: boolean;
  headroom: number;
  visible_teams: string[] | null;
  teams: IFitTeam[];
  mig?: IMigNode[];
}

/** A MIG node's config now and the one its pods' demand suggests (administrators only). */
export interface IMigNode {
  node: string;
  model: string;
  gpus: number;
  now: string | null;
  demand: Record<string, number>;
  advised: string | null;
  reason: string;
  line: string;
}

export interface IFieldError {
  path: string;
  message: string;
}

export interface IPreviewChange {
  key: string;
  now: ReclaimAction;
  preview: ReclaimAction;
}

/** `POST api/console/preview`: a pasted policy on the live state. */
export interface IPreview {
  valid: true;
  policy: string;
  at: string;
  summary: IActionCounts;
  summary_in_force: IActionCounts | null;
  changed: IPreviewChange[];
  workbenches: IWorkbench[];
}

/** The same, answered 400: the pasted policy's problems. */
export interface IPreviewRefused {
  status: 400;
  valid: false;
  message: string;
  errors: IFieldError[];
}

export interface IHistorySeries {
  name: string;
  values: (number | null)[];
}

export interface IHistoryChart {
  name: 'allocated' | 'busy' | 'idle' | 'queued' | 'wait' | 'reclaims' | 'handoffs';
  title: string;
  unit: string;
  by: string;
  series: IHistorySeries[];
  total_series: number;
  truncated: boolean;
  note?: string;
}

export interface IHistoryAvailable {
  available: true;
  start: number;
  end: number;
  step: number;
  range_seconds: number;
  max_points: number;
  max_series: number;
  teams: string[] | null;
  times: number[];
  charts: IHistoryChart[];
}

export interface IHistoryUnavailable {
  available: false;
  reason: string;
  message: string;
}

/** `GET api/console/history`. */
export type IHistory = IHistoryAvailable | IHistoryUnavailable;

/** An answer that was not a success, as the service words it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: unknown
  ) {
    super(message);
  }
}

function xsrfToken(): string {
  return document.querySelector<HTMLMetaElement>('meta[name="xsrf-token"]')?.content ?? '';
}

/** Send one request to the console's API (`path` relative to the page) and read its JSON. */
export async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  headers.set('X-XSRFToken', xsrfToken());
  const response = await fetch(path, { ...init, headers, credentials: 'same-origin' });
  const body: unknown = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message =
      typeof body === 'object' && body !== null && 'message' in body
        ? String(body.message)
        : response.statusText;
    throw new ApiError(response.status, message, body);
  }
  return body as T;
}
