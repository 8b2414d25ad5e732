import { Dialog, Notification, showDialog, showErrorMessage } from '@jupyterlab/apputils';

import { formatBytes } from './format';
import { say } from './messages';
import type { ICapWarning } from './model';
import { describeError } from './request';
import {
  actionLabel,
  capMessage,
  confirmText,
  downConfirmText,
  downLabel,
  downOffer,
  type IKernelAtCap,
  type IResizeOffer,
  type IResizeOffering,
  newlyAtCap,
  parseOffer
} from './resizeModel';

/** How long the service's offer is kept before it is asked again (ms). */
const OFFER_TTL_MS = 60_000;
/** How long to wait for this server to stop answering before the hub's page is opened (ms). */
const STOP_WAIT_MS = 120_000;

/** What the way up needs of the app and the server (injected: tested without either). */
export interface IResizeApi {
  /** `GET gpuaas/api/resize`. */
  fetchOffer: () => Promise<unknown>;
  /** `POST gpuaas/api/resize`: its status (202: moving) and body. */
  move: (body: { offering: string }) => Promise<{ status: number; data: unknown }>;
  /** Save every open document; rejects when one could not be saved. */
  saveAll: () => Promise<unknown>;
  /** Whether this server still answers (it stops a moment after the move is accepted). */
  serverAnswers: () => Promise<boolean>;
  /** The hub's page that follows the stop, the queue and the start (null outside JupyterHub). */
  pendingUrl: string | null;
  /** Open a URL in this tab. */
  go: (url: string) => void;
}

function messageOf(data: unknown, fallback: string): string {
  if (typeof data === 'object' && data !== null) {
    const record = data as Record<string, unknown>;
    for (const key of ['message', 'error']) {
      if (typeof record[key] === 'string' && record[key] !== '') {
        return record[key];
      }
    }
  }
  return fallback;
}

function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms));
}

/** Where a move in `direction` goes: the offer's next size up, or its way down. */
function moveTarget(offer: IResizeOffer | null, direction: 'up' | 'down'): IResizeOffering | null {
  return (direction === 'up' ? offer?.next : offer?.down) ?? null;
}

/**
 * "Move to a bigger GPU" beside the GPU panel's cap warnings, and the notification a kernel
 * at its cap gets: confirm, save every document, ask the service to move the server, then
 * follow the move on the hub's page (the stop, the queue position, the start), which opens
 * JupyterLab again when the server is up. The way down the same way: where the service offers
 * a smaller share (this session's peak stayed far below its own), the panel says so with a
 * button, read again every minute.
 */
export class WayUp {
  readonly node: HTMLDivElement;

  constructor(api: IResizeApi) {
    this._api = api;
    this.node = document.createElement('div');
    this.node.className = 'jp-gpuaas-way-up';
    this._button = document.createElement('button');
    this._button.className = 'jp-mod-styled jp-mod-accept jp-gpuaas-way-up-button';
    this._button.hidden = true;
    this._button.addEventListener('click', () => {
      void this.start();
    });
    this._down = document.createElement('p');
    this._down.className = 'jp-gpuaas-way-down';
    this._down.hidden = true;
    this._downText = document.createElement('span');
    this._downButton = document.createElement('button');
    this._downButton.className = 'jp-mod-styled jp-gpuaas-way-down-button';
    this._downButton.addEventListener('click', () => {
      void this.start('down');
    });
    this._down.append(this._downText, ' ', this._downButton);
    this._status = document.createElement('span');
    this._status.className = 'jp-gpuaas-way-up-status';
    this._status.setAttribute('role', 'status');
    this.node.append(this._down, this._button, this._status);
  }

  /** The offer last read (null before, or when the service gave none). */
  get offer(): IResizeOffer | null {
    return this._offer;
  }

  /**
   * Called by the panel with its cap warnings as it shows them: the node to put beside them
   * (null without any), the offer read again when old, kernels newly at their cap told.
   */
  render(warnings: readonly ICapWarning[]): HTMLElement | null {
    void this._update(warnings);
    // The way down shows on an idle session, whose panel may never render again.
    this._timer ??= setInterval(() => void this._update(this._warnings), OFFER_TTL_MS);
    return this.node;
  }

  /** Confirm, save everything, ask for the move (up, or down where offered), then follow it. */
  async start(direction: 'up' | 'down' = 'up'): Promise<void> {
    const offer = this._offer;
    const next = moveTarget(offer, direction);
    if (this._moving || offer === null || next === null) {
      return;
    }
    this._moving = true; // one dialog and one move at a time
    if (
      (await this._confirmed(offer, next, direction)) &&
      (await this._savedAll()) &&
      (await this._moveAccepted(next))
    ) {
      await this._follow(next);
    }
  }

  /** The user's yes to the move, said as the way up's or the way down's. */
  private async _confirmed(
    offer: IResizeOffer,
    next: IResizeOffering,
    direction: 'up' | 'down'
  ): Promise<boolean> {
    const down = direction === 'down' && offer.down ? offer.down : null;
    const choice = await showDialog({
      title: say(down === null ? 'resize.title' : 'resize.downTitle'),
      body: down === null ? confirmText({ ...offer, next }) : downConfirmText({ ...offer, down }),
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: say('resize.confirm') })]
    });
    if (!choice.button.accept) {
      this._moving = false;
    }
    return choice.button.accept;
  }

  /** Every open document saved; a failure is said, and there is no move. */
  private async _savedAll(): Promise<boolean> {
    this._show(say('resize.saving'));
    try {
      await this._api.saveAll();
      return true;
    } catch (error) {
      this._moving = false;
      this._show('');
      await showErrorMessage(
        say('resize.notMoved'),
        say('resize.notSaved', { problem: describeError(error) })
      );
      return false;
    }
  }

  /** The move asked for and accepted (202); a refusal or failure is said. */
  private async _moveAccepted(next: IResizeOffering): Promise<boolean> {
    let answer: { status: number; data: unknown };
    try {
      answer = await this._api.move({ offering: next.slug });
    } catch (error) {
      answer = { status: 0, data: { message: describeError(error) } };
    }
    if (answer.status === 202) {
      return true;
    }
    this._moving = false;
    this._show('');
    await showErrorMessage(say('resize.notMoved'), messageOf(answer.data, say('resize.refused')));
    return false;
  }

  /** Wait for the server to stop, then go to the hub's spawn page for the new size. */
  private async _follow(next: IResizeOffering): Promise<void> {
    this._show(say('resize.stopping', { next: next.title }));
    const deadline = Date.now() + STOP_WAIT_MS;
    while (Date.now() < deadline && (await this._api.serverAnswers())) {
      await sleep(1000);
    }
    if (this._api.pendingUrl === null) {
      this._show(say('resize.follow', { next: next.title }));
      return;
    }
    this._api.go(this._api.pendingUrl);
  }

  private async _update(warnings: readonly ICapWarning[]): Promise<void> {
    this._warnings = warnings;
    await this._readOfferWhenOld();
    this._showWayUp(this._offer?.next ?? null, warnings.length > 0);
    this._showWayDown(this._offer, warnings.length > 0);
    this._tell(warnings);
  }

  /** The offer read again when older than OFFER_TTL_MS (one read at a time). */
  private async _readOfferWhenOld(): Promise<void> {
    if (Date.now() - this._readAt < OFFER_TTL_MS || this._reading) {
      return;
    }
    this._reading = true;
    try {
      this._offer = parseOffer(await this._api.fetchOffer());
    } catch {
      this._offer = null; // not under JupyterHub, or the service is not there: no action
    } finally {
      this._readAt = Date.now();
      this._reading = false;
    }
  }

  /** The way up beside the cap warnings only: no bigger share is offered to a session at ease. */
  private _showWayUp(next: IResizeOffering | null, warned: boolean): void {
    this._button.hidden = next === null || !warned;
    this._button.textContent = next === null ? '' : actionLabel(next);
  }

  /** The way down to a session at ease only. */
  private _showWayDown(offer: IResizeOffer | null, warned: boolean): void {
    const down = offer?.down ?? null;
    this._down.hidden = down === null || offer === null || warned;
    this._downText.textContent =
      down === null || offer === null ? '' : downOffer({ ...offer, down });
    this._downButton.textContent = down === null ? '' : downLabel(down);
    this._downButton.disabled = this._moving;
  }

  private _tell(warnings: readonly ICapWarning[]): void {
    const atCap: IKernelAtCap[] = [];
    for (const w of warnings) {
      if (w.level !== 'full' || w.kernel === null) {
        continue;
      }
      const path = w.kernel.path;
      atCap.push({
        kernel: w.kernel.kernel.kernel_id,
        who:
          path === null
            ? (w.kernel.kernel.name ?? say('cap.aKernel'))
            : path.slice(path.lastIndexOf('/') + 1),
        cap: formatBytes(w.cap.memory)
      });
    }
    const next = this._offer?.next ?? null;
    for (const at of newlyAtCap(this._told, atCap)) {
      const actions: Notification.IAction[] =
        next === null
          ? []
          : [
              {
                label: actionLabel(next),
                callback: () => {
                  void this.start();
                }
              }
            ];
      Notification.warning(capMessage(at, next), { autoClose: false, actions });
    }
  }

  private _show(text: string): void {
    this._status.textContent = text;
    this._button.disabled = this._moving;
    this._downButton.disabled = this._moving;
  }

  private readonly _api: IResizeApi;
  private readonly _button: HTMLButtonElement;
  private readonly _status: HTMLSpanElement;
  private readonly _told = new Set<string>();
  private readonly _down: HTMLParagraphElement;
  private readonly _downText: HTMLSpanElement;
  private readonly _downButton: HTMLButtonElement;
  private _warnings: readonly ICapWarning[] = [];
  private _timer: ReturnType<typeof setInterval> | null = null;
  private _offer: IResizeOffer | null = null;
  private _readAt = -Infinity;
  private _reading = false;
  private _moving = false;
}
