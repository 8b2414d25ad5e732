import type { IConnectionLost } from '@jupyterlab/application';
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { estimateWords, type IKernelStateEstimate, parseEstimate } from './kernelStateModel';
import { say } from './messages';
import {
  byKeptState,
  causeSentence,
  holdingWords,
  idleSecondsNow,
  inWords,
  type IStanding,
  localTime,
  parseCause,
  parseReclaim,
  parseWithdrawn,
  parseStanding,
  secondsLeft,
  standingLine
} from './reclaimModel';
import {
  EMPTY_STATE,
  type IPollFailure,
  type IReclaimState,
  lostToReclaim,
  noteWords,
  stoppedWords,
  withAnswer,
  withFailure,
  withKept
} from './reclaimState';

/** How often the warning is asked for (seconds); it keeps asking while the panel is hidden. */
export const RECLAIM_POLL_SECONDS = 5;

/** The answer to `POST gpuaas/api/reclaim/snooze`: its status (200, 409) and body. */
export interface ISnoozeAnswer {
  status: number;
  data: unknown;
}

export interface IReclaimWatchOptions {
  /** `GET gpuaas/api/reclaim`. */
  fetchWarning: () => Promise<unknown>;
  /** `GET gpuaas/api/reclaim/standing`: the policy that applies and where this server stands. */
  fetchStanding?: () => Promise<unknown>;
  /** `GET gpuaas/api/kernel-state/estimate`: what a reclaim now would keep of the variables. */
  fetchEstimate?: () => Promise<unknown>;
  /** `POST gpuaas/api/reclaim/snooze` ("Keep my GPU"); rejects when the server did not answer. */
  snooze: () => Promise<ISnoozeAnswer>;
  /** Save every open document (best effort): once when the deadline comes, and "Save now". */
  saveAll: () => Promise<unknown>;
  /** The HTTP status of a failed request (0: no answer; -1: not a request's failure). */
  failureOf: (error: unknown) => IPollFailure;
  /** Whether a kernel of this server runs a cell now (then it is not idle, whatever was said). */
  busyNow?: () => boolean;
  /** The hub's home page, where a stopped server is started again (null outside JupyterHub). */
  hubHome?: string | null;
}

/** Why listeners are called: a new answer (or failure), or the once-a-second clock. */
export type ReclaimChange = 'state' | 'tick';

/** How far the service's clock (`now`, its answer's) is ahead of this browser's, in ms. */
function serviceSkewMs(now: unknown, received: number): number {
  const serviceNow = typeof now === 'string' ? Date.parse(now) : NaN;
  return Number.isNaN(serviceNow) ? 0 : serviceNow - received;
}

/**
 * The tab's knowledge of a reclaim: it polls the warning (every 5 s, also while the GPU panel
 * and the browser tab are hidden: the warning must reach the user; the server extension does
 * not count these requests as activity), acts on it (the save at the deadline, "Keep my GPU",
 * "Save now"), and tells its listeners: the sidebar banner and the alerts.
 */
export class ReclaimWatch {
  constructor(options: IReclaimWatchOptions) {
    this._options = options;
    this.hubHome = options.hubHome ?? null;
    this._poll = new Poll({
      factory: () => this._refresh(),
      frequency: {
        interval: RECLAIM_POLL_SECONDS * 1000,
        backoff: true,
        max: RECLAIM_POLL_SECONDS * 12 * 1000
      },
      name: 'jupyter-gpuaas:reclaim',
      standby: 'never'
    });
    this._timer = window.setInterval(() => {
      this._emit('tick');
    }, 1000);
  }

  readonly hubHome: string | null;

  get state(): IReclaimState {
    return this._state;
  }

  get standing(): IStanding | null {
    return this._standing;
  }

  /** What a reclaim now would keep of the kernels' variables, and whether its save fits the
   * reclaim's wait ("" when nothing is known or there is nothing to keep). */
  get estimateLine(): string {
    return estimateWords(this._estimate, this._standing?.snapshot_wait_seconds ?? null);
  }

  /** The policy line now: the idle time counted on, "in use now" while a cell runs. */
  standingLineNow(now: number): string {
    const s = this._standing;
    if (s?.known && this._options.busyNow?.()) {
      return standingLine({ ...s, activity: 'busy' });
    }
    return standingLine(s, idleSecondsNow(s, now - this._standingAt) ?? undefined);
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Call `listener` on every change; returns the function that stops it. */
  subscribe(listener: (change: ReclaimChange) => void): () => void {
    this._listeners.add(listener);
    return () => {
      this._listeners.delete(listener);
    };
  }

  /** Ask the server now. */
  refresh(): Promise<void> {
    return this._poll.refresh();
  }

  /** "Keep my GPU". */
  async keep(): Promise<void> {
    try {
      const answer = await this._options.snooze();
      const data = (answer.data ?? {}) as { until?: unknown; snoozes_left?: unknown };
      this._state =
        answer.status === 200
          ? withKept(
              this._state,
              typeof data.until === 'string' ? data.until : null,
              typeof data.snoozes_left === 'number' ? data.snoozes_left : 0
            )
          : { ...this._state, note: { kind: 'refused' } };
    } catch {
      this._state = { ...this._state, note: { kind: 'failed' } };
    }
    this._emit('state');
    await this._poll.refresh();
  }

  /** "Save now", and the save at the deadline. */
  async saveNow(): Promise<void> {
    let saved = true;
    try {
      await this._options.saveAll();
    } catch {
      saved = false;
    }
    this._state = { ...this._state, note: { kind: saved ? 'saved' : 'saveFailed' } };
    this._emit('state');
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._poll.dispose();
    window.clearInterval(this._timer);
    this._listeners.clear();
  }

  private async _refresh(): Promise<void> {
    let answer: unknown;
    try {
      answer = await this._options.fetchWarning();
    } catch (error) {
      this._state = withFailure(this._state, this._options.failureOf(error), Date.now());
      this._emit('state');
      throw error; // the poll backs off
    }
    this._takeAnswer(answer, Date.now());
    await this._refreshStanding();
    await this._refreshEstimate();
    await this._saveOnceWhenSaving();
    this._emit('state');
  }

  /** A warning answer received at `received`. */
  private _takeAnswer(answer: unknown, received: number): void {
    const body = (answer ?? {}) as { error_kind?: unknown; now?: unknown; warning?: unknown };
    // The service could not be asked: no news, not "no warning".
    if (typeof body.error_kind === 'string') {
      return;
    }
    const warning = parseReclaim(answer);
    this._state = withAnswer(
      this._state,
      warning,
      warning ? parseCause(body.warning) : null,
      serviceSkewMs(body.now, received),
      received,
      parseWithdrawn(answer)
    );
  }

  /** From a few seconds before the deadline (`saving`): save every open document, once. */
  private async _saveOnceWhenSaving(): Promise<void> {
    const w = this._state.warning;
    const key = w === null ? '' : `${w.warned_at} ${w.reclaim_at}`;
    if (w?.saving && this._savedFor !== key) {
      this._savedFor = key;
      await this.saveNow();
    }
  }

  private async _refreshStanding(): Promise<void> {
    if (!this._options.fetchStanding) {
      return;
    }
    try {
      const answer = await this._options.fetchStanding();
      // The service could not be asked (no hub, not reachable): nothing to say about a policy.
      const unasked = typeof (answer as { error_kind?: unknown } | null)?.error_kind === 'string';
      this._standing = unasked ? null : parseStanding(answer);
    } catch {
      this._standing = null;
    }
    this._standingAt = Date.now();
  }

  /** Asked only where a reclaim may come (a warning, or reclaiming on for this server): the
   * server asks its idle kernels for their sizes (at most every 5 minutes). */
  private async _refreshEstimate(): Promise<void> {
    const mayReclaim = this._state.warning !== null || this._standing?.reclaim_on === true;
    if (!this._options.fetchEstimate || !mayReclaim) {
      this._estimate = null;
      return;
    }
    try {
      this._estimate = parseEstimate(await this._options.fetchEstimate());
    } catch {
      this._estimate = null;
    }
  }

  private _emit(change: ReclaimChange): void {
    for (const listener of [...this._listeners]) {
      try {
        listener(change);
      } catch (error) {
        console.error('jupyter-gpuaas: a reclaim listener failed', error);
      }
    }
  }

  private readonly _options: IReclaimWatchOptions;
  private readonly _poll: Poll;
  private readonly _timer: number;
  private readonly _listeners = new Set<(change: ReclaimChange) => void>();
  private _state: IReclaimState = EMPTY_STATE;
  private _standing: IStanding | null = null;
  private _standingAt = 0;
  private _estimate: IKernelStateEstimate | null = null;
  private _savedFor = '';
  private _disposed = false;
}

/**
 * JupyterLab's handler of a lost connection for a tab that watches for reclaims: when the
 * connection is lost to the reclaim this tab was warned of, nothing more is shown (the tab's
 * own notice says when and why the server was stopped and offers to start again; the tab asks
 * the server now, so that the notice comes at once); any other lost connection goes to
 * `fallback`, JupyterLab's own handler.
 */
export function reclaimAwareConnectionLost(
  watch: () => ReclaimWatch | null,
  fallback: IConnectionLost
): IConnectionLost {
  return async (manager, error, translator) => {
    const w = watch();
    if (w !== null && !w.isDisposed && lostToReclaim(w.state, Date.now())) {
      w.refresh().catch(() => undefined); // a failure is the stop this tab concludes from
      return;
    }
    await fallback(manager, error, translator);
  };
}

/** Whether the browser may show its own notifications, and whether it could still ask. */
export function browserPermission(): NotificationPermission | 'unsupported' {
  return typeof window.Notification === 'function' ? window.Notification.permission : 'unsupported';
}

/**
 * The reclaim warning at the top of the GPU panel: why this server's GPU will be freed, a
 * countdown, "Keep my GPU" while snoozes are left, and the note that kernel state is lost;
 * after the stop, what happened and how to go on. Also the policy line while no warning is on.
 */
export class ReclaimBanner extends Widget {
  constructor(watch: ReclaimWatch) {
    super();
    this._watch = watch;
    this.addClass('jp-gpuaas-reclaim');
    this.node.setAttribute('role', 'status');
    this.setHidden(true);
    this._unsubscribe = watch.subscribe(change => {
      if (change === 'state') {
        this._render();
      } else {
        this._tick();
      }
    });
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._unsubscribe();
    super.dispose();
  }

  /** Once a second: only the live words change (the buttons stay put for clicks). */
  private _tick(): void {
    for (const [node, words] of this._live) {
      node.textContent = words();
    }
    const w = this._watch.state.warning;
    if (w !== null && this._countdown !== null) {
      this._countdown.dataset.secondsLeft = String(
        secondsLeft(w, Date.now() + this._watch.state.skewMs)
      );
    }
  }

  /** A paragraph whose words are recomputed every second. */
  private _livePara(className: string, words: () => string): HTMLElement {
    const p = document.createElement('p');
    p.className = className;
    p.textContent = words();
    this._live.set(p, words);
    return p;
  }

  private _render(): void {
    this._live.clear();
    this._countdown = null;
    const state = this._watch.state;
    const w = state.warning;
    const parts = [...this._renderNews(state), ...this._renderNote(state)];
    if (parts.length > 0 && browserPermission() === 'default' && state.stopped === null) {
      parts.push(this._askButton());
    }
    this.setHidden(parts.length === 0);
    this.node.classList.toggle('jp-gpuaas-reclaim-warned', w !== null);
    this.node.classList.toggle('jp-gpuaas-reclaim-stopped', state.stopped !== null);
    this.node.setAttribute('role', w === null && state.stopped === null ? 'status' : 'alert');
    this.node.replaceChildren(...parts);
  }

  /** The warning, else the stop, else the policy line (when there is one). */
  private _renderNews(state: IReclaimState): HTMLElement[] {
    if (state.warning !== null) {
      return this._renderWarning();
    }
    if (state.stopped !== null) {
      return this._renderStopped();
    }
    const parts: HTMLElement[] = [];
    if (this._watch.standingLineNow(Date.now()) !== '') {
      parts.push(
        this._livePara('jp-gpuaas-reclaim-standing', () => this._watch.standingLineNow(Date.now()))
      );
    }
    return [...parts, ...this._keptParas()];
  }

  /** What a reclaim would keep of the variables, and how long its save would take (none or
   * one paragraph). */
  private _keptParas(): HTMLElement[] {
    const words = this._watch.estimateLine;
    if (words === '') {
      return [];
    }
    const p = document.createElement('p');
    p.className = 'jp-gpuaas-reclaim-kept';
    p.textContent = words;
    return [p];
  }

  /** What this tab was told ("Keep my GPU" answered), until a stop. */
  private _renderNote(state: IReclaimState): HTMLElement[] {
    const note = state.note;
    if (note === null || state.stopped !== null) {
      return [];
    }
    return [
      this._livePara('jp-gpuaas-reclaim-note', () =>
        noteWords(note, Date.now(), this._watch.state.skewMs)
      )
    ];
  }

  private _renderWarning(): HTMLElement[] {
    const { warning, cause, skewMs } = this._watch.state;
    if (warning === null) {
      return [];
    }
    const w = warning;
    // Said once: what, when (the browser's local time) with the countdown inside, then why.
    const title = document.createElement('h3');
    title.className = 'jp-gpuaas-reclaim-title';
    const countdown = document.createElement('span');
    countdown.className = 'jp-gpuaas-reclaim-countdown';
    const left = (): number => secondsLeft(w, Date.now() + this._watch.state.skewMs);
    countdown.dataset.secondsLeft = String(left());
    this._countdown = countdown;
    // The title's words around the live countdown: "… at 19:56 (in " + countdown + ")".
    const marker = '\u0000';
    const words = say(w.dry_run ? 'warn.titleDryRun' : 'warn.title', {
      holding: holdingWords(cause?.kind ?? 'gpu'),
      time: localTime(Date.parse(w.reclaim_at) - skewMs),
      countdown: marker
    });
    const [before = '', after = ''] = words.split(marker);
    const countdownWords = (): string => inWords(left());
    countdown.textContent = countdownWords();
    this._live.set(countdown, countdownWords);
    title.append(before, countdown, after);
    const reason = document.createElement('p');
    reason.className = 'jp-gpuaas-reclaim-reason';
    reason.textContent = causeSentence(cause) || say('warn.reasonFallback');
    const loss = document.createElement('p');
    loss.className = 'jp-gpuaas-reclaim-loss';
    loss.textContent = say(byKeptState(w, 'warn.loss', 'warn.lossNoState'));
    // The service's own words (queue and resource names) for whoever wants them.
    const details = document.createElement('details');
    details.className = 'jp-gpuaas-reclaim-details';
    const summary = document.createElement('summary');
    summary.textContent = say('warn.details');
    const detail = document.createElement('p');
    detail.textContent = w.reason;
    details.append(summary, detail);
    const parts: HTMLElement[] = [title, reason, loss, ...this._keptParas(), details];
    if (w.snoozes_left > 0 && !w.dry_run) {
      const button = document.createElement('button');
      button.className = 'jp-mod-styled jp-mod-accept jp-gpuaas-reclaim-keep';
      button.textContent = say('warn.keepButton', { left: w.snoozes_left });
      button.onclick = () => {
        void this._watch.keep();
      };
      parts.push(button);
    }
    return parts;
  }

  private _renderStopped(): HTMLElement[] {
    const { stopped } = this._watch.state;
    if (stopped === null) {
      return [];
    }
    const hubHome = this._watch.hubHome;
    const words = (): ReturnType<typeof stoppedWords> => stoppedWords(stopped, Date.now(), hubHome);
    const title = document.createElement('h3');
    title.className = 'jp-gpuaas-reclaim-title';
    title.textContent = words().title;
    const when = this._livePara('jp-gpuaas-reclaim-reason', () => words().when);
    const kept = document.createElement('p');
    kept.className = 'jp-gpuaas-reclaim-loss';
    kept.textContent = words().kept;
    const next = document.createElement('p');
    next.className = 'jp-gpuaas-reclaim-next';
    const text = words().next;
    const linkWords = say('stopped.hubLink');
    const at = text.indexOf(linkWords);
    if (hubHome !== null && at >= 0) {
      const link = document.createElement('a');
      link.className = 'jp-gpuaas-reclaim-hub';
      link.href = hubHome;
      link.textContent = linkWords;
      next.append(text.slice(0, at), link, text.slice(at + linkWords.length));
    } else {
      next.textContent = text;
    }
    return [title, when, kept, next];
  }

  /** Ask for the browser's notifications, only on this explicit click. */
  private _askButton(): HTMLElement {
    const button = document.createElement('button');
    button.className = 'jp-mod-styled jp-gpuaas-reclaim-ask';
    button.textContent = say('warn.askBrowser');
    button.onclick = () => {
      void window.Notification.requestPermission().then(() => {
        this._render();
      });
    };
    return button;
  }

  private readonly _watch: ReclaimWatch;
  private readonly _unsubscribe: () => void;
  private readonly _live = new Map<HTMLElement, () => string>();
  private _countdown: HTMLElement | null = null;
}
