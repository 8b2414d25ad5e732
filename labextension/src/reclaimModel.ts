/**
 * The reclaim warning as the server extension passes it on from the gpuaas service
 * (`GET gpuaas/api/reclaim`, docs/culler.md): pure functions, tested without a DOM.
 */
import { durationWords } from './durations';
import { say } from './messages';
import type { components } from './extensionApi';

/**
 * The warning as the sidebar keeps it: the answer's fields but its cause, which is read on its
 * own (parseCause). `saving`: from a few seconds before the deadline, save every open document.
 */
export type IReclaimWarning = Omit<components['schemas']['service_warning'], 'cause'>;

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

/** The cause as the service sends it (its OpenAPI document), which `parseCause` reads. */
export type IReclaimCauseAnswer = components['schemas']['service_reclaim_cause'];

/** The warning as the service sends it, which `parseReclaim` and `parseCause` read. */
export type IReclaimWarningAnswer = components['schemas']['service_warning'];

/** `GET gpuaas/api/reclaim` as the service answers it (the server extension forwards it). */
export type IReclaimAnswer = components['schemas']['service_reclaim'];

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
    case 'shared':
    case 'fraction':
    case 'cpu':
      return say(`holding.${kind}`);
    default:
      return say('holding.gpu');
  }
}

/** "in 4 min 05 s", or "any moment now" at the deadline (the sidebar, once a second). */
export function inWords(seconds: number): string {
  return seconds > 0
    ? say('relative.in', { duration: countdownLabel(seconds) })
    : say('relative.due');
}

/**
 * The same, coarser, for a notification that is updated only when its words change: whole
 * minutes (rounded up) from a minute on, steps of 10 s below.
 */
export function inWordsCoarse(seconds: number): string {
  if (seconds <= 0) {
    return say('relative.due');
  }
  if (seconds < 60) {
    return say('relative.in', { duration: `${String(Math.ceil(seconds / 10) * 10)} s` });
  }
  return say('relative.in', { duration: durationWords(Math.ceil(seconds / 60) * 60) });
}

/** "12 min ago", "just now" (under 5 s). */
export function agoWords(seconds: number): string {
  return seconds < 5
    ? say('relative.justNow')
    : say('relative.ago', { duration: durationWords(seconds) });
}

/** A time of day in the browser's locale and time zone, hours and minutes: "19:56", "7:56 PM". */
export function localTime(at: number | string): string {
  const date = new Date(at);
  return Number.isNaN(date.getTime())
    ? ''
    : date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/** The cause as a sentence: "Your team's job demo-train is waiting for this MIG slice." */
export function causeSentence(cause: IReclaimCause | null): string {
  if (cause === null) {
    return '';
  }
  const holding = holdingWords(cause.kind);
  const idle = cause.idle_seconds !== null ? durationWords(cause.idle_seconds) : null;
  const limit = cause.limit_seconds !== null ? durationWords(cause.limit_seconds) : null;
  const waiting = (sentence: string): string =>
    sentence + (idle ? say('cause.idleTail', { idle }) : '.');
  switch (cause.code) {
    case 'demand': {
      const f = cause.for;
      if (f?.team === 'own') {
        const noun = say(
          f.object === 'Job' ? 'noun.job' : f.object === 'Pod' ? 'noun.notebook' : 'noun.work'
        );
        return waiting(say('cause.ownWork', { noun, name: f.name, holding }));
      }
      if (f?.team === 'other') {
        return waiting(
          f.name
            ? say('cause.otherTeam', { team: f.name, holding })
            : say('cause.anotherTeam', { holding })
        );
      }
      return say('cause.queued', { holding });
    }
    case 'placement': {
      const f = cause.for;
      if (f?.team === 'own') {
        const noun = say(f.object === 'Job' ? 'noun.job' : 'noun.work');
        return say('cause.placementOwn', { noun, name: f.name });
      }
      return say('cause.placement');
    }
    case 'max-idle':
      return limit !== null
        ? say('cause.maxIdle', { idle: idle ?? 'a long time', limit })
        : say('cause.maxIdleNoLimit', { idle: idle ?? 'a long time' });
    case 'always':
      return say('cause.always', { idle: idle ?? 'a while' });
    case 'max-age':
      return limit !== null ? say('cause.maxAge', { limit }) : say('cause.maxAgeNoLimit');
    default:
      return '';
  }
}

/** Why, in a few words, for a notification: "for queued work". */
export function purposeWords(cause: IReclaimCause | null): string {
  switch (cause?.code) {
    case 'demand':
      return say('purpose.demand');
    case 'placement':
      return say('purpose.placement');
    case 'max-idle':
      return say('purpose.idle');
    case 'always':
      return say('purpose.always');
    case 'max-age':
      return say('purpose.maxAge');
    default:
      return say('purpose.unknown');
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
  /** When the service judged `idle_seconds`, and when it answered (its clock). */
  decided_at: string | null;
  now: string | null;
}

/** The rule of the policy that applies to a server, as the service sends it. */
export type IPolicyFieldsAnswer = components['schemas']['service_policy_fields'];

/** `GET gpuaas/api/reclaim/standing` for a server no cycle has seen yet. */
export type IStandingUnknownAnswer = components['schemas']['service_standing_unknown'];

/** `GET gpuaas/api/reclaim/standing` for a server the last cycle judged. */
export type IStandingKnownAnswer = components['schemas']['service_standing_known'];

/** The standing as the service answers it (the server extension forwards it), which
 * `parseStanding` reads. */
export type IStandingAnswer = components['schemas']['service_standing'];

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
      reclaim_at: null,
      decided_at: null,
      now: null
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
    reclaim_at: typeof o.reclaim_at === 'string' ? o.reclaim_at : null,
    decided_at: typeof o.decided_at === 'string' ? o.decided_at : null,
    now: typeof o.now === 'string' ? o.now : null
  };
}

/**
 * How long the server has been idle `elapsedMs` after the answer arrived: the service's
 * figure is from its last decision (`decided_at`), so it is counted on to its answer's `now`
 * and from there by this browser's clock. Null unless idle with a figure.
 */
export function idleSecondsNow(s: IStanding | null, elapsedMs: number): number | null {
  if (s?.activity !== 'idle' || s.idle_seconds === null) {
    return null;
  }
  const decided = s.decided_at === null ? NaN : Date.parse(s.decided_at);
  const answered = s.now === null ? NaN : Date.parse(s.now);
  const lag = Number.isNaN(decided) || Number.isNaN(answered) ? 0 : Math.max(0, answered - decided);
  return s.idle_seconds + (lag + Math.max(0, elapsedMs)) / 1000;
}

/**
 * The sidebar's policy line: "Policy mig-notebooks: idle for 12 min; reclaimed after 30 min
 * idle when queued work needs it; no queued work needs it now." Empty while unknown.
 * `idleNow`: the idle time now, counted on from the answer (`idleSecondsNow`).
 */
export function standingLine(s: IStanding | null, idleNow?: number): string {
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
        ? `idle for ${durationWords(idleNow ?? s.idle_seconds)}`
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
    placement: 'a training Job needs the whole card it is on',
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
