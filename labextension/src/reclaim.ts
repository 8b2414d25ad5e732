import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import {
  causeSentence,
  countdownLabel,
  holdingWords,
  type IReclaimCause,
  type IReclaimWarning,
  parseCause,
  parseReclaim,
  parseStanding,
  secondsLeft,
  standingLine
} from './reclaimModel';

/** How often the banner asks for a warning (seconds); it keeps asking while hidden. */
export const RECLAIM_POLL_SECONDS = 5;

export interface IReclaimBannerOptions {
  /** `GET gpuaas/api/reclaim`. */
  fetchWarning: () => Promise<unknown>;
  /** `GET gpuaas/api/reclaim/standing`: the policy that applies and where this server stands. */
  fetchStanding?: () => Promise<unknown>;
  /** `POST gpuaas/api/reclaim/snooze` ("Keep my GPU"). */
  snooze: () => Promise<unknown>;
  /** Save every open document (best effort), called once when the deadline comes. */
  saveAll: () => Promise<unknown>;
}

/**
 * The reclaim warning at the top of the GPU panel: why this server's GPU will be freed, a
 * countdown, "Keep my GPU" while snoozes are left, and the note that kernel state is lost. At
 * the deadline (the service says "saving") every open document is saved once.
 */
export class ReclaimBanner extends Widget {
  constructor(options: IReclaimBannerOptions) {
    super();
    this._options = options;
    this.addClass('jp-gpuaas-reclaim');
    this.node.setAttribute('role', 'alert');
    this.setHidden(true);
    this._poll = new Poll({
      factory: async () => {
        await this._refresh();
      },
      frequency: {
        interval: RECLAIM_POLL_SECONDS * 1000,
        backoff: true,
        max: RECLAIM_POLL_SECONDS * 12 * 1000
      },
      standby: 'never'
    });
    this._timer = window.setInterval(() => {
      this._tick();
    }, 1000);
  }

  get warning(): IReclaimWarning | null {
    return this._warning;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    window.clearInterval(this._timer);
    super.dispose();
  }

  private async _refresh(): Promise<void> {
    const answer = await this._options.fetchWarning();
    this._warning = parseReclaim(answer);
    this._cause = this._warning ? parseCause((answer as { warning: unknown }).warning) : null;
    if (this._options.fetchStanding) {
      try {
        this._standing = standingLine(parseStanding(await this._options.fetchStanding()));
      } catch {
        this._standing = '';
      }
    }
    if (this._warning?.saving && !this._saved) {
      this._saved = true;
      try {
        await this._options.saveAll();
        this._note = 'Your open documents were saved.';
      } catch {
        this._note = 'Saving the open documents failed: save your work now.';
      }
    }
    if (this._warning === null) {
      this._saved = false;
    }
    this._render();
  }

  private async _keep(): Promise<void> {
    try {
      const answer = (await this._options.snooze()) as { reason?: string };
      this._note = answer.reason ? `Kept: ${answer.reason}` : 'Kept.';
    } catch (error) {
      this._note = `Could not keep the GPU: ${error instanceof Error ? error.message : String(error)}`;
    }
    await this._poll.refresh();
  }

  /** Once a second: only the countdown's text changes (the button stays put for clicks). */
  private _tick(): void {
    const w = this._warning;
    if (w === null || this._title === null || this._countdown === null) {
      return;
    }
    const left = secondsLeft(w, Date.now());
    this._countdown.dataset.secondsLeft = String(left);
    this._countdown.textContent = countdownLabel(left);
  }

  private _render(): void {
    this._title = null;
    this._countdown = null;
    const w = this._warning;
    this.setHidden(w === null && this._note === '' && this._standing === '');
    this.node.classList.toggle('jp-gpuaas-reclaim-warned', w !== null);
    this.node.setAttribute('role', w === null ? 'status' : 'alert');
    this.node.replaceChildren();
    if (w === null) {
      if (this._standing !== '') {
        const line = document.createElement('p');
        line.className = 'jp-gpuaas-reclaim-standing';
        line.textContent = this._standing;
        this.node.append(line);
      }
      if (this._note !== '') {
        const note = document.createElement('p');
        note.className = 'jp-gpuaas-reclaim-note';
        note.textContent = this._note;
        this.node.append(note);
      }
      return;
    }
    const left = secondsLeft(w, Date.now());
    // Said once: what, when (the browser's local time) with the countdown inside, then why.
    const title = document.createElement('h3');
    title.className = 'jp-gpuaas-reclaim-title';
    const countdown = document.createElement('span');
    countdown.className = 'jp-gpuaas-reclaim-countdown';
    countdown.dataset.secondsLeft = String(left);
    countdown.textContent = countdownLabel(left);
    this._countdown = countdown;
    title.append(...titleParts(w, this._cause), countdown, ')');
    this._title = title;
    const reason = document.createElement('p');
    reason.className = 'jp-gpuaas-reclaim-reason';
    reason.textContent = causeSentence(this._cause) || 'Queued work needs what it holds.';
    const details = document.createElement('details');
    details.className = 'jp-gpuaas-reclaim-details';
    const summary = document.createElement('summary');
    summary.textContent = 'Details';
    const detail = document.createElement('p');
    detail.textContent = w.reason;
    details.append(summary, detail);
    const loss = document.createElement('p');
    loss.className = 'jp-gpuaas-reclaim-loss';
    loss.textContent =
      'The server will be stopped: open documents are saved first, but running kernels and ' +
      'their state (variables, GPU memory) are lost. Your files stay.';
    this.node.append(title, reason, loss, details);
    if (w.snoozes_left > 0 && !w.dry_run) {
      const button = document.createElement('button');
      button.className = 'jp-mod-styled jp-mod-accept jp-gpuaas-reclaim-keep';
      button.textContent = `Keep my GPU (${String(w.snoozes_left)} left)`;
      button.onclick = () => {
        void this._keep();
      };
      this.node.append(button);
    }
    if (this._note !== '') {
      const note = document.createElement('p');
      note.className = 'jp-gpuaas-reclaim-note';
      note.textContent = this._note;
      this.node.append(note);
    }
  }

  private readonly _options: IReclaimBannerOptions;
  private readonly _poll: Poll;
  private readonly _timer: number;
  private _warning: IReclaimWarning | null = null;
  private _cause: IReclaimCause | null = null;
  private _standing = '';
  private _saved = false;
  private _note = '';
  private _title: HTMLElement | null = null;
  private _countdown: HTMLElement | null = null;
}

/** "This MIG slice will be freed at 19:56 (in " — the countdown and ")" follow. */
function titleParts(w: IReclaimWarning, cause: IReclaimCause | null): string[] {
  const what = holdingWords(cause?.kind ?? 'gpu');
  const subject = what.charAt(0).toUpperCase() + what.slice(1);
  const at = new Date(w.reclaim_at);
  const time = Number.isNaN(at.getTime())
    ? ''
    : ` at ${at.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}`;
  const verb = w.dry_run ? 'would be freed (dry run)' : 'will be freed';
  return [`${subject} ${verb}${time} (in `];
}
