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

/** Why the GPU is to be freed, in plain fields (the service's `warning.cause`). */
export interface IReclaimCause {
  code: string;
  kind: string;
  idle_seconds: number | null;
  limit_seconds: number | null;
  for: { team: 'own'; name: string; object: string } | { team: 'other'; name: string } | null;
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** The cause in a warning answer's `warning.cause`, or null. */
export function parseCause(w: unknown): IReclaimCause | null {
  if (typeof w !== 'object' || w === null || !('cause' in w)) {
    return null;
  }
  const c = w.cause;
  if (typeof c !== 'object' || c === null) {
    return null;
  }
  const o = c as Record<string, unknown>;
  if (typeof o.code !== 'string' || typeof o.kind !== 'string') {
    return null;
  }
  let target: IReclaimCause['for'] = null;
  const f = o.for as Record<string, unknown> | null | undefined;
  if (f && typeof f.name === 'string' && (f.team === 'own' || f.team === 'other')) {
    target =
      f.team === 'own'
        ? {
            team: 'own',
            name: f.name,
            object: typeof f.object === 'string' ? f.object : 'Workload'
          }
        : { team: 'other', name: f.name };
  }
  return {
    code: o.code,
    kind: o.kind,
    idle_seconds: num(o.idle_seconds),
    limit_seconds: num(o.limit_seconds),
    for: target
  };
}

/** "this MIG slice", "this GPU", ... (what a person calls what the server holds). */
export function holdingWords(kind: string): string {
  switch (kind) {
    case 'mig':
      return 'this MIG slice';
    case 'shared':
      return 'this shared GPU';
    case 'fraction':
      return 'this GPU share';
    case 'cpu':
      return 'this server';
    default:
      return 'this GPU';
  }
}

/** "12 min", "2 h 05 min", "3 d 4 h" (durations in prose). */
export function durationWords(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${String(s)} s`;
  }
  const m = Math.floor(s / 60);
  if (m < 60) {
    return `${String(m)} min`;
  }
  const h = Math.floor(m / 60);
  if (h < 48) {
    return m % 60 ? `${String(h)} h ${String(m % 60).padStart(2, '0')} min` : `${String(h)} h`;
  }
  return `${String(Math.floor(h / 24))} d ${String(h % 24)} h`;
}

/** The cause as a sentence: "Your team's job demo-train is waiting for this MIG slice." */
export function causeSentence(cause: IReclaimCause | null): string {
  if (cause === null) {
    return '';
  }
  const what = holdingWords(cause.kind);
  const idle = cause.idle_seconds !== null ? durationWords(cause.idle_seconds) : null;
  switch (cause.code) {
    case 'demand': {
      const f = cause.for;
      if (f?.team === 'own') {
        const noun = f.object === 'Job' ? 'job' : f.object === 'Pod' ? 'notebook' : 'work';
        return (
          `Your team's ${noun} ${f.name} is waiting for ${what}` +
          (idle ? `, idle for ${idle}.` : '.')
        );
      }
      if (f?.team === 'other') {
        return (
          `Queued work of ${f.name ? `team ${f.name}` : 'another team'} is waiting for ${what}` +
          (idle ? `, idle for ${idle}.` : '.')
        );
      }
      return `Queued work is waiting for ${what}.`;
    }
    case 'max-idle':
      return (
        `It has been idle for ${idle ?? 'a long time'}` +
        (cause.limit_seconds !== null
          ? `; the limit is ${durationWords(cause.limit_seconds)}.`
          : '.')
      );
    case 'always':
      return `It has been idle for ${idle ?? 'a while'}, and idle GPUs go back to the pool.`;
    case 'max-age':
      return (
        `This server has run for the longest a server may run` +
        (cause.limit_seconds !== null
          ? ` (${durationWords(cause.limit_seconds)}), even while in use.`
          : ', even while in use.')
      );
    default:
      return '';
  }
}

/** Where this server stands with the culler (`GET gpuaas/api/reclaim/standing`). */
export interface IStanding {
  known: boolean;
  reclaim_on: boolean;
  policy: {
    name: string;
    idle_after_seconds: number;
    reclaim: string;
    max_idle_seconds: number | null;
    max_age_seconds: number | null;
  } | null;
  activity: string;
  idle_seconds: number | null;
  action: string;
  code: string;
  reclaim_at: string | null;
}

export function parseStanding(data: unknown): IStanding | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const o = data as Record<string, unknown>;
  if (o.known !== true) {
    return {
      known: false,
      reclaim_on: o.reclaim_on === true,
      policy: null,
      activity: '',
      idle_seconds: null,
      action: '',
      code: '',
      reclaim_at: null
    };
  }
  const p = o.policy as Record<string, unknown> | null;
  const policy =
    p && typeof p.name === 'string' && typeof p.idle_after_seconds === 'number'
      ? {
          name: p.name,
          idle_after_seconds: p.idle_after_seconds,
          reclaim: typeof p.reclaim === 'string' ? p.reclaim : 'when-queued',
          max_idle_seconds: num(p.max_idle_seconds),
          max_age_seconds: num(p.max_age_seconds)
        }
      : null;
  return {
    known: true,
    reclaim_on: o.reclaim_on === true,
    policy,
    activity: typeof o.activity === 'string' ? o.activity : 'unknown',
    idle_seconds: num(o.idle_seconds),
    action: typeof o.action === 'string' ? o.action : '',
    code: typeof o.code === 'string' ? o.code : '',
    reclaim_at: typeof o.reclaim_at === 'string' ? o.reclaim_at : null
  };
}

/**
 * The sidebar's policy line: "Policy mig-notebooks: idle for 12 min; reclaimed after 30 min
 * idle when queued work needs it; no queued work needs it now." Empty while unknown.
 */
export function standingLine(s: IStanding | null): string {
  if (!s?.known) {
    return s && !s.reclaim_on ? 'No reclaim policy is in force: this GPU is not reclaimed.' : '';
  }
  if (s.policy === null) {
    return 'No reclaim policy applies to this server.';
  }
  const p = s.policy;
  const now =
    s.activity === 'busy'
      ? 'in use now'
      : s.activity === 'idle' && s.idle_seconds !== null
        ? `idle for ${durationWords(s.idle_seconds)}`
        : 'activity unknown';
  let rule =
    `reclaimed after ${durationWords(p.idle_after_seconds)} idle` +
    (p.reclaim === 'always' ? '' : ' when queued work needs it');
  if (p.max_idle_seconds !== null) {
    rule += `, or after ${durationWords(p.max_idle_seconds)} idle in any case`;
  }
  if (p.max_age_seconds !== null) {
    rule += `; at most ${durationWords(p.max_age_seconds)} in all`;
  }
  const stand: Record<string, string> = {
    'no-demand': 'no queued work needs it now',
    'not-idle-yet': p.reclaim === 'always' ? '' : 'not idle long enough yet',
    busy: '',
    exempt: 'exempt',
    snoozed: 'kept for now ("Keep my GPU")',
    demand: 'queued work needs it now',
    'max-idle': 'idle past the limit',
    'max-age': 'past the longest run',
    always: 'idle long enough'
  };
  const where =
    s.action === 'warn' || s.action === 'wait'
      ? 'a reclaim is coming (see above)'
      : (stand[s.code] ?? '');
  return `Policy ${p.name}: ${[now, rule, where].filter(Boolean).join('; ')}.`;
}
