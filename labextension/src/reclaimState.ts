/**
 * What the tab knows about a reclaim, and what it tells the user wherever they are in
 * JupyterLab: pure functions of plain data and a clock, tested without a DOM.
 *
 * The tab learns of a warning from its poll of `gpuaas/api/reclaim`. When the poll fails
 * because the server is gone (JupyterHub answers for a stopped server, or nothing answers)
 * at or after the deadline of the last warning it saw, the tab concludes that the reclaim
 * happened, and says so with what that warning said: nothing more.
 */
import { say } from './messages';
import {
  byKeptState,
  holdingWords,
  inWords,
  inWordsCoarse,
  agoWords,
  type IReclaimCause,
  type IReclaimWarning,
  localTime,
  purposeWords,
  secondsLeft
} from './reclaimModel';

/** A failed poll: its HTTP status, or 0 when nothing answered. */
export interface IPollFailure {
  status: number;
}

/** The server was stopped after the warning this tab showed. */
export interface IStopped {
  /** When this tab found it gone (ms, this browser's clock). */
  at: number;
  warning: IReclaimWarning;
  cause: IReclaimCause | null;
}

/** The answer to "Keep my GPU" or to the save at the deadline, for the sidebar. */
export type ReclaimNote =
  | {
      kind: 'kept';
      until: string | null;
      snoozesLeft: number;
      /** The warning the press kept (its `warned_at`): withdrawn, whatever a late answer says. */
      warnedAt: string | null;
    }
  | { kind: 'refused' }
  | { kind: 'failed' }
  | { kind: 'saved' }
  | { kind: 'saveFailed' };

export interface IReclaimState {
  warning: IReclaimWarning | null;
  cause: IReclaimCause | null;
  /** The service's clock minus this browser's (ms), from the last answer's `now`. */
  skewMs: number;
  stopped: IStopped | null;
  note: ReclaimNote | null;
}

export const EMPTY_STATE: IReclaimState = {
  warning: null,
  cause: null,
  skewMs: 0,
  stopped: null,
  note: null
};

/**
 * A failed poll this close to the deadline (seconds) or later means the reclaim happened:
 * the stop starts at the deadline, and the two clocks may differ by a little.
 */
export const STOPPED_MARGIN_SECONDS = 30;

/**
 * JupyterHub's answers for a user's server that is not running (424, or 503 with its legacy
 * setting), a proxy with no route (502), or no answer at all.
 */
export function isServerGone(failure: IPollFailure): boolean {
  return [0, 424, 502, 503].includes(failure.status);
}

/**
 * How long past its deadline a warning that the service no longer shows is still held as the
 * stop under way (seconds): the service forgets it when it asks the hub to stop the server,
 * and the server may answer a little longer. Past this, with the server still answering, the
 * warning is over.
 */
export const STOP_GRACE_SECONDS = 120;

/** Whether this tab's "Keep my GPU" was answered for `warning`. */
function keptHere(note: ReclaimNote | null, warning: IReclaimWarning): boolean {
  return note?.kind === 'kept' && note.warnedAt === warning.warned_at;
}

/**
 * Whether the warning held, gone from an answer at `now`, is the stop beginning: a real
 * (not dry-run) warning this tab did not keep and the service did not say it withdrew
 * (`withdrawnWarnedAt`), from just before its deadline to STOP_GRACE_SECONDS past it.
 */
function stopBeginning(
  state: IReclaimState,
  skewMs: number,
  now: number,
  withdrawnWarnedAt: string | null
): boolean {
  const last = state.warning;
  if (
    last === null ||
    last.dry_run ||
    keptHere(state.note, last) ||
    last.warned_at === withdrawnWarnedAt
  ) {
    return false;
  }
  const overdue = (now + skewMs - Date.parse(last.reclaim_at)) / 1000;
  return overdue >= -STOPPED_MARGIN_SECONDS && overdue < STOP_GRACE_SECONDS;
}

/**
 * A new answer from the server at `now`: it runs (again), so nothing is stopped. A warning
 * that vanishes at its deadline is the stop beginning, not the warning ending — unless this
 * tab's "Keep my GPU" was answered, or the service says it withdrew that warning
 * (`withdrawnWarnedAt`, its `warned_at`).
 */
export function withAnswer(
  state: IReclaimState,
  warning: IReclaimWarning | null,
  cause: IReclaimCause | null,
  skewMs: number,
  now: number,
  withdrawnWarnedAt: string | null = null
): IReclaimState {
  if (warning !== null && keptHere(state.note, warning)) {
    // kept: the service withdraws this warning at its next cycle; an answer from before that
    // must not bring its countdown back
    warning = null;
  }
  if (warning === null && stopBeginning(state, skewMs, now, withdrawnWarnedAt)) {
    return { ...state, skewMs, stopped: null };
  }
  // A new warning: what this tab said of an earlier one ("kept until ...") is over.
  const note = warning !== null && state.note?.kind === 'kept' ? null : state.note;
  return { ...state, warning, cause, note, skewMs, stopped: null };
}

/** "Keep my GPU" was answered yes: the warning is withdrawn at once, and stays so. */
export function withKept(
  state: IReclaimState,
  until: string | null,
  snoozesLeft: number
): IReclaimState {
  const warnedAt = state.warning?.warned_at ?? null;
  return { ...state, warning: null, note: { kind: 'kept', until, snoozesLeft, warnedAt } };
}

/** A failed poll: the server stopped, if it failed as a stopped server does past the deadline. */
export function withFailure(
  state: IReclaimState,
  failure: IPollFailure,
  now: number
): IReclaimState {
  const w = state.warning;
  if (state.stopped !== null || w === null || w.dry_run || !isServerGone(failure)) {
    return state;
  }
  if (secondsLeft(w, now + state.skewMs) > STOPPED_MARGIN_SECONDS) {
    return state;
  }
  return { ...state, warning: null, stopped: { at: now, warning: w, cause: state.cause } };
}

/**
 * Whether a lost connection to the server is the reclaim this tab was told of: the server was
 * found stopped after the warning, or the warning's deadline is near or past (the stop is under
 * way and the poll has not failed yet). Then the product's own notice says what happened and
 * offers to start again, and JupyterLab's "Server unavailable or unreachable" dialog would only
 * sit on top of it; otherwise JupyterLab says what it says. A trial run stops nothing.
 */
export function lostToReclaim(state: IReclaimState, now: number): boolean {
  if (state.stopped !== null) {
    return true;
  }
  const w = state.warning;
  return w !== null && !w.dry_run && secondsLeft(w, now + state.skewMs) <= STOPPED_MARGIN_SECONDS;
}

/** What the sidebar's note says. */
export function noteWords(note: ReclaimNote, now: number, skewMs: number): string {
  switch (note.kind) {
    case 'kept': {
      const until = note.until === null ? NaN : Date.parse(note.until);
      if (Number.isNaN(until)) {
        return say('keep.done');
      }
      const values = {
        holding: say('holding.gpu'),
        time: localTime(until - skewMs),
        countdown: inWords(Math.ceil((until - now - skewMs) / 1000)),
        more:
          note.snoozesLeft === 1
            ? say('keep.onceMore')
            : say('keep.moreTimes', { n: note.snoozesLeft })
      };
      return note.snoozesLeft > 0 ? say('keep.untilMore', values) : say('keep.untilLast', values);
    }
    case 'refused':
      return say('keep.refused');
    case 'failed':
      return say('keep.failed');
    case 'saved':
      return say('save.done');
    case 'saveFailed':
      return say('save.failed');
  }
}

/** The deadline as this browser's time (ms). */
function deadlineMs(w: IReclaimWarning, skewMs: number): number {
  const at = Date.parse(w.reclaim_at);
  return Number.isNaN(at) ? NaN : at - skewMs;
}

/** The sidebar's words for a stopped server: what happened, then what to do. */
export function stoppedWords(
  stopped: IStopped,
  now: number,
  hubHome: string | null
): { title: string; when: string; kept: string; next: string } {
  return {
    title: say('stopped.title'),
    when: say('stopped.when', {
      time: localTime(stopped.at),
      ago: agoWords((now - stopped.at) / 1000),
      holding: holdingWords(stopped.cause?.kind ?? 'gpu'),
      purpose: purposeWords(stopped.cause)
    }),
    kept: say(byKeptState(stopped.warning, 'stopped.kept', 'stopped.keptNoState')),
    next: hubHome === null ? say('stopped.noHub') : say('stopped.hub')
  };
}

export type AlertAction = 'keep' | 'save' | 'startAgain';

/** What JupyterLab's notification, the page title, the GPU tab and the browser say. */
export interface IAlertView {
  /** One notification per warning or stop: `key` tells a new one from an update. */
  toast: {
    key: string;
    message: string;
    type: 'warning' | 'info';
    actions: AlertAction[];
  } | null;
  /** Put before the page's own title ('' for none). */
  titlePrefix: string;
  tab: 'warned' | 'stopped' | null;
  tabCaption: string;
  /** The browser's own notification (shown once per `tag`), where the user allowed them. */
  browser: { tag: string; title: string; body: string } | null;
}

export const NO_ALERT: IAlertView = {
  toast: null,
  titlePrefix: '',
  tab: null,
  tabCaption: '',
  browser: null
};

/**
 * The alerts for a state at `now`: a warning (not a trial run) or a stop after one. A trial
 * run stops nothing: it shows in the sidebar only. `hubHome`: where to start again (null
 * outside JupyterHub).
 */
export function alertView(state: IReclaimState, now: number, hubHome: string | null): IAlertView {
  const w = state.warning;
  if (w !== null && !w.dry_run) {
    const holding = holdingWords(state.cause?.kind ?? 'gpu');
    const time = localTime(deadlineMs(w, state.skewMs));
    const left = secondsLeft(w, now + state.skewMs);
    const message = say(byKeptState(w, 'warn.toast', 'warn.toastNoState'), {
      holding,
      time,
      countdown: inWordsCoarse(left),
      purpose: purposeWords(state.cause)
    });
    const actions: AlertAction[] = w.snoozes_left > 0 ? ['keep', 'save'] : ['save'];
    const key = `warning ${w.warned_at} ${w.reclaim_at}`;
    return {
      toast: { key, message, type: 'warning', actions },
      titlePrefix: say('warn.pageTitle', { countdown: inWordsCoarse(left) }),
      tab: 'warned',
      tabCaption: say('warn.tabCaption', { holding, time }),
      browser: { tag: key, title: say('warn.browserTitle', { time }), body: message }
    };
  }
  const stopped = state.stopped;
  if (stopped !== null) {
    const message = say('stopped.toast', {
      time: localTime(stopped.at),
      holding: holdingWords(stopped.cause?.kind ?? 'gpu'),
      purpose: purposeWords(stopped.cause)
    });
    const key = `stopped ${stopped.warning.warned_at} ${stopped.warning.reclaim_at}`;
    return {
      toast: { key, message, type: 'info', actions: hubHome === null ? [] : ['startAgain'] },
      titlePrefix: say('stopped.pageTitle'),
      tab: 'stopped',
      tabCaption: say('stopped.tabCaption'),
      browser: { tag: key, title: say('stopped.browserTitle'), body: message }
    };
  }
  return NO_ALERT;
}

/** The page title with `prefix` in front, once (JupyterLab rewrites the title as tabs change). */
export function prefixedTitle(title: string, prefix: string, previousPrefix: string): string {
  const bare =
    previousPrefix !== '' && title.startsWith(previousPrefix)
      ? title.slice(previousPrefix.length)
      : title;
  return prefix + bare;
}
