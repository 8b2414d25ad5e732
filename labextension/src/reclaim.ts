import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { countdownLabel, type IReclaimWarning, parseReclaim, secondsLeft } from './reclaimModel';

/** How often the banner asks for a warning (seconds); it keeps asking while hidden. */
export const RECLAIM_POLL_SECONDS = 5;

export interface IReclaimBannerOptions {
  /** `GET gpuaas/api/reclaim`. */
  fetchWarning: () => Promise<unknown>;
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
    this._warning = parseReclaim(await this._options.fetchWarning());
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
    this._title.textContent = titleOf(w, left);
    this._countdown.dataset.secondsLeft = String(left);
    this._countdown.textContent = countdownLabel(left);
  }

  private _render(): void {
    this._title = null;
    this._countdown = null;
    const w = this._warning;
    this.setHidden(w === null && this._note === '');
    this.node.replaceChildren();
    if (w === null) {
      if (this._note !== '') {
        const note = document.createElement('p');
        note.className = 'jp-gpuaas-reclaim-note';
        note.textContent = this._note;
        this.node.append(note);
      }
      return;
    }
    const left = secondsLeft(w, Date.now());
    const title = document.createElement('h3');
    title.className = 'jp-gpuaas-reclaim-title';
    title.textContent = titleOf(w, left);
    this._title = title;
    const countdown = document.createElement('span');
    countdown.className = 'jp-gpuaas-reclaim-countdown';
    countdown.dataset.secondsLeft = String(left);
    countdown.textContent = countdownLabel(left);
    this._countdown = countdown;
    const reason = document.createElement('p');
    reason.className = 'jp-gpuaas-reclaim-reason';
    reason.textContent = w.reason;
    const loss = document.createElement('p');
    loss.className = 'jp-gpuaas-reclaim-loss';
    loss.textContent =
      'The server will be stopped: open documents are saved first, but running kernels and ' +
      'their state (variables, GPU memory) are lost. Your files stay.';
    this.node.append(title, countdown, reason, loss);
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
  private _saved = false;
  private _note = '';
  private _title: HTMLElement | null = null;
  private _countdown: HTMLElement | null = null;
}

function titleOf(w: IReclaimWarning, left: number): string {
  return w.dry_run
    ? 'This GPU would be reclaimed (dry run)'
    : `This GPU will be freed in ${countdownLabel(left)}`;
}
