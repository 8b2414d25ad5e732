/**
 * The reclaim warning as the server extension passes it on from the gpuaas service
 * (`GET gpuaas/api/reclaim`, docs/culler.md): pure functions, tested without a DOM.
 */

export interface IReclaimWarning {
  warned_at: string;
  reclaim_at: string;
  seconds_left: number;
  reason: string;
  snoozes_left: number;
  dry_run: boolean;
  /** From a few seconds before the deadline: save every open document now. */
  saving: boolean;
}

/** The warning in an answer, or null (no warning, or an answer of another shape). */
export function parseReclaim(data: unknown): IReclaimWarning | null {
  if (typeof data !== 'object' || data === null || !('warning' in data)) {
    return null;
  }
  const w = data.warning;
  if (typeof w !== 'object' || w === null) {
    return null;
  }
  const o = w as Record<string, unknown>;
  if (typeof o.reclaim_at !== 'string' || typeof o.reason !== 'string') {
    return null;
  }
  return {
    warned_at: typeof o.warned_at === 'string' ? o.warned_at : o.reclaim_at,
    reclaim_at: o.reclaim_at,
    seconds_left: typeof o.seconds_left === 'number' ? o.seconds_left : 0,
    reason: o.reason,
    snoozes_left: typeof o.snoozes_left === 'number' ? o.snoozes_left : 0,
    dry_run: o.dry_run === true,
    saving: o.saving === true
  };
}

/** Seconds until the deadline at `now` (never negative; NaN-safe). */
export function secondsLeft(warning: IReclaimWarning, now: number): number {
  const deadline = Date.parse(warning.reclaim_at);
  if (Number.isNaN(deadline)) {
    return Math.max(0, Math.round(warning.seconds_left));
  }
  return Math.max(0, Math.ceil((deadline - now) / 1000));
}

/** "1 h 05 min", "4 min 05 s", "12 s", "now". */
export function countdownLabel(seconds: number): string {
  if (seconds <= 0) {
    return 'now';
  }
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  const pad = (n: number): string => String(n).padStart(2, '0');
  if (h > 0) {
    return `${String(h)} h ${pad(m)} min`;
  }
  if (m > 0) {
    return `${String(m)} min ${pad(s)} s`;
  }
  return `${String(s)} s`;
}
