/**
 * The console's API answers (docs/console.md) and the one way the page asks for them.
 * The shapes are the service's (culler/gpuaas_service/console/: aggregates.py, gpus.py, fit.py).
 */

export type Activity = 'busy' | 'idle' | 'unknown';
export type Amounts = Record<'nominal' | 'notebooks' | 'training' | 'borrowed' | 'lent', string>;

export interface IFlavorRow {
  flavor: string;
  resource: string;
  nominal: number;
  notebooks: number;
  training: number;
  borrowed: number;
  lent: number;
  /** Kubernetes quantities, as Kueue counts. */
  shown: Amounts;
  /** In the units a person reads: GiB, % of a GPU, GPUs, MIG slices, shares. */
  readable: Amounts;
  /** GPU-equivalents, where the resource has a known size ("0" otherwise). */
  gpu_eq: Amounts;
  /** Something is used, borrowed or lent (rows without are folded away). */
  in_use: boolean;
}

export interface IHours {
  allocated_hours: number;
  busy_hours: number;
  idle_hours: number;
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
  activity: Activity;
  signal: string;
  idle_seconds: number | null;
  unknown_seconds: number | null;
  policy: string | null;
  action: string;
  code: string;
  reason: string;
  reclaim_at: string | null;
  dry_run: boolean;
}

export interface IHandoff {
  workload: string;
  team: string;
  reclaimed_at: string;
  admitted_at: string | null;
  latency_seconds: number | null;
  status: string;
  reason: string;
}

export interface IEvent {
  at: string;
  event: string;
  result?: string;
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
}

export interface IConsole {
  now: string;
  decided_at: string | null;
  last_error: string | null;
  reclaim: 'on' | 'off';
  visible_teams: string[] | null;
  policy: { file?: string | null; error?: string; in_force: string };
  teams: ITeam[];
  workbenches: IWorkbench[];
  events: IEvent[];
  handoffs: IHandoff[];
  regret: { reclaims: number; returned_within_window: number; window_seconds: number } | null;
  summary: Record<string, number>;
}

export interface IGpuRow {
  key: string;
  /** "" where the service does not know it (training pods are not watched). */
  node: string;
  pool: string[];
  kind: string;
  device: string;
  uuids: string[];
  holder: string;
  holder_kind: 'workbench' | 'training';
  team: string;
  offering: string;
  gpu_equivalents: string;
  since: string | null;
  state: Activity | 'training';
  idle_since: string | null;
  memory_bytes: number | null;
  memory_cap_bytes: number | null;
  utilization_percent: number | null;
  next_step: string;
}

export interface IGpus {
  now: string;
  visible_teams: string[] | null;
  nodes: {
    node: string;
    holdings: number;
    idle: number;
    pools: string[];
    gpu_equivalents: string;
  }[];
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

export interface IFit {
  catalog: boolean;
  headroom: number;
  visible_teams: string[] | null;
  teams: { team: string; frees: string; users: IFitRow[] }[];
}

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
