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

type IFields = Record<string, unknown>;

/** `data[key]` when `data` is an object holding an object there, else null. */
function objectAt(data: unknown, key: string): IFields | null {
  if (typeof data !== 'object' || data === null || !(key in data)) {
    return null;
  }
  const value = (data as IFields)[key];
  return typeof value === 'object' && value !== null ? (value as IFields) : null;
}

function stringOr<T>(value: unknown, fallback: T): string | T {
  return typeof value === 'string' ? value : fallback;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' ? value : fallback;
}

/** The warning in an answer, or null (no warning, or an answer of another shape). */
export function parseReclaim(data: unknown): IReclaimWarning | null {
  const o = objectAt(data, 'warning');
  if (o === null || typeof o.reclaim_at !== 'string' || typeof o.reason !== 'string') {
    return null;
  }
  return {
    warned_at: stringOr(o.warned_at, o.reclaim_at),
    reclaim_at: o.reclaim_at,
    seconds_left: numberOr(o.seconds_left, 0),
    reason: o.reason,
    snoozes_left: numberOr(o.snoozes_left, 0),
    dry_run: o.dry_run === true,
    saving: o.saving === true,
    // absent (a service older than this sidebar): not promised
    keeps_kernel_state: o.keeps_kernel_state === true
  };
}

/**
 * The `warned_at` of the warning the service says it withdrew (`withdrawn`), or null: a
 * warning gone with this is over, not the stop beginning, however near its deadline.
 */
export function parseWithdrawn(data: unknown): string | null {
  const o = objectAt(data, 'withdrawn');
  return o !== null && typeof o.warned_at === 'string' ? o.warned_at : null;
}

/**
 * `kept` where the stop saves the kernels' variables first (the service says so), else
 * `notKept`: the words of what a stop loses follow what the service will do.
 */
export function byKeptState<T>(warning: IReclaimWarning, kept: T, notKept: T): T {
  return warning.keeps_kernel_state === true ? kept : notKept;
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

/** The cause's `for`: whose work waits (a team's own, or another team's), or null. */
function causeTarget(value: unknown): IReclaimCause['for'] {
  const f = value as IFields | null | undefined;
  if (!f || typeof f.name !== 'string') {
    return null;
  }
  if (f.team === 'own') {
    return { team: 'own', name: f.name, object: stringOr(f.object, 'Workload') };
  }
  return f.team === 'other' ? { team: 'other', name: f.name } : null;
}

/** The cause in a warning answer's `warning.cause`, or null. */
export function parseCause(w: unknown): IReclaimCause | null {
  const o = objectAt(w, 'cause');
  if (o === null || typeof o.code !== 'string' || typeof o.kind !== 'string') {
    return null;
  }
  return {
    code: o.code,
    kind: o.kind,
    idle_seconds: num(o.idle_seconds),
    limit_seconds: num(o.limit_seconds),
    for: causeTarget(o.for)
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

function idleWords(cause: IReclaimCause): string | null {
  return cause.idle_seconds !== null ? durationWords(cause.idle_seconds) : null;
}

function limitWords(cause: IReclaimCause): string | null {
  return cause.limit_seconds !== null ? durationWords(cause.limit_seconds) : null;
}

/** What a team's own waiting work is: "job", "notebook", "work". */
function ownNoun(object: string): string {
  return say(object === 'Job' ? 'noun.job' : object === 'Pod' ? 'noun.notebook' : 'noun.work');
}

/** Queued work waits for what this server holds: whose, and how long it has been idle. */
function demandSentence(cause: IReclaimCause): string {
  const holding = holdingWords(cause.kind);
  const f = cause.for;
  if (f === null) {
    return say('cause.queued', { holding });
  }
  const idle = idleWords(cause);
  const tail = idle ? say('cause.idleTail', { idle }) : '.';
  if (f.team === 'own') {
    return say('cause.ownWork', { noun: ownNoun(f.object), name: f.name, holding }) + tail;
  }
  const sentence = f.name
    ? say('cause.otherTeam', { team: f.name, holding })
    : say('cause.anotherTeam', { holding });
  return sentence + tail;
}

/** A training Job needs the whole card this server's share is on. */
function placementSentence(cause: IReclaimCause): string {
  const f = cause.for;
  if (f?.team !== 'own') {
    return say('cause.placement');
  }
  const noun = say(f.object === 'Job' ? 'noun.job' : 'noun.work');
  return say('cause.placementOwn', { noun, name: f.name });
}

function maxIdleSentence(cause: IReclaimCause): string {
  const idle = idleWords(cause) ?? 'a long time';
  const limit = limitWords(cause);
  return limit !== null
    ? say('cause.maxIdle', { idle, limit })
    : say('cause.maxIdleNoLimit', { idle });
}

function alwaysSentence(cause: IReclaimCause): string {
  return say('cause.always', { idle: idleWords(cause) ?? 'a while' });
}

function maxAgeSentence(cause: IReclaimCause): string {
  const limit = limitWords(cause);
  return limit !== null ? say('cause.maxAge', { limit }) : say('cause.maxAgeNoLimit');
}

/** The sentence for each cause code the service sends. */
const CAUSE_SENTENCES = new Map<string, (cause: IReclaimCause) => string>([
  ['demand', demandSentence],
  ['placement', placementSentence],
  ['max-idle', maxIdleSentence],
  ['always', alwaysSentence],
  ['max-age', maxAgeSentence]
]);

/** The cause as a sentence: "Your team's job demo-train is waiting for this MIG slice." */
export function causeSentence(cause: IReclaimCause | null): string {
  if (cause === null) {
    return '';
  }
  const sentence = CAUSE_SENTENCES.get(cause.code);
  return sentence ? sentence(cause) : '';
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
  /** How long a reclaim now would wait for this server's kernels to save (null: not known). */
  snapshot_wait_seconds: number | null;
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

/** The rule of the policy that applies, as the sidebar keeps it. */
type IStandingPolicy = NonNullable<IStanding['policy']>;

/** A server no cycle has judged yet: only whether reclaiming is on at all. */
function unknownStanding(reclaimOn: boolean): IStanding {
  return {
    known: false,
    reclaim_on: reclaimOn,
    policy: null,
    activity: '',
    idle_seconds: null,
    action: '',
    code: '',
    reclaim_at: null,
    decided_at: null,
    now: null,
    snapshot_wait_seconds: null
  };
}

function parsePolicy(value: unknown): IStandingPolicy | null {
  const p = value as IFields | null;
  if (!p || typeof p.name !== 'string' || typeof p.idle_after_seconds !== 'number') {
    return null;
  }
  return {
    name: p.name,
    idle_after_seconds: p.idle_after_seconds,
    reclaim: stringOr(p.reclaim, 'when-queued'),
    max_idle_seconds: num(p.max_idle_seconds),
    max_age_seconds: num(p.max_age_seconds)
  };
}

export function parseStanding(data: unknown): IStanding | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const o = data as IFields;
  if (o.known !== true) {
    return unknownStanding(o.reclaim_on === true);
  }
  return {
    known: true,
    reclaim_on: o.reclaim_on === true,
    policy: parsePolicy(o.policy),
    activity: stringOr(o.activity, 'unknown'),
    idle_seconds: num(o.idle_seconds),
    action: stringOr(o.action, ''),
    code: stringOr(o.code, ''),
    reclaim_at: stringOr(o.reclaim_at, null),
    decided_at: stringOr(o.decided_at, null),
    now: stringOr(o.now, null),
    snapshot_wait_seconds: num(o.snapshot_wait_seconds)
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

/** "in use now", "idle for 12 min" (counted on to `idleNow` when given), "activity unknown". */
function activityWords(s: IStanding, idleNow: number | undefined): string {
  if (s.activity === 'busy') {
    return 'in use now';
  }
  return s.activity === 'idle' && s.idle_seconds !== null
    ? `idle for ${durationWords(idleNow ?? s.idle_seconds)}`
    : 'activity unknown';
}

/** The policy's rule: "reclaimed after 30 min idle when queued work needs it, or ...". */
function ruleWords(p: IStandingPolicy): string {
  let rule =
    `reclaimed after ${durationWords(p.idle_after_seconds)} idle` +
    (p.reclaim === 'always' ? '' : ' when queued work needs it');
  if (p.max_idle_seconds !== null) {
    rule += `, or after ${durationWords(p.max_idle_seconds)} idle in any case`;
  }
  if (p.max_age_seconds !== null) {
    rule += `; at most ${durationWords(p.max_age_seconds)} in all`;
  }
  return rule;
}

/** Where the last cycle left the server, by its decision's code. */
const STANDING_WORDS: ReadonlyMap<string, string> = new Map([
  ['no-demand', 'no queued work needs it now'],
  ['not-idle-yet', 'not idle long enough yet'],
  ['busy', ''],
  ['exempt', 'exempt'],
  ['snoozed', 'kept for now ("Keep my GPU")'],
  ['demand', 'queued work needs it now'],
  ['placement', 'a training Job needs the whole card it is on'],
  ['max-idle', 'idle past the limit'],
  ['max-age', 'past the longest run'],
  ['always', 'idle long enough']
]);

function whereWords(s: IStanding, p: IStandingPolicy): string {
  if (s.action === 'warn' || s.action === 'wait') {
    return 'a reclaim is coming (see above)';
  }
  // under "always" a server not idle long enough yet needs no words beyond the rule's
  if (s.code === 'not-idle-yet' && p.reclaim === 'always') {
    return '';
  }
  return STANDING_WORDS.get(s.code) ?? '';
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
  const parts = [activityWords(s, idleNow), ruleWords(p), whereWords(s, p)];
  return `Policy ${p.name}: ${parts.filter(Boolean).join('; ')}.`;
}
