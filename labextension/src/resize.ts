import { Dialog, Notification, showDialog, showErrorMessage } from '@jupyterlab/apputils';

import { formatBytes } from './format';
import { say } from './messages';
import type { ICapWarning } from './model';
import { describeError } from './request';
import {
  actionLabel,
  capMessage,
  confirmText,
  type IKernelAtCap,
  type IResizeOffer,
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

/**
 * "Move to a bigger GPU" beside the GPU panel's cap warnings, and the notification a kernel
 * at its cap gets: confirm, save every document, ask the service to move the server, then
 * follow the move on the hub's page (the stop, the queue position, the start), which opens
 * JupyterLab again when the server is up.
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
    this._status = document.createElement('span');
    this._status.className = 'jp-gpuaas-way-up-status';
    this._status.setAttribute('role', 'status');
    this.node.append(this._button, this._status);
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
    return warnings.length === 0 ? null : this.node;
  }

  /** Confirm, save everything, ask for the move, then follow it on the hub's page. */
  async start(): Promise<void> {
    const offer = this._offer;
    const next = offer?.next ?? null;
    if (this._moving || offer === null || next === null) {
      return;
    }
    this._moving = true; // one dialog and one move at a time
    const choice = await showDialog({
      title: say('resize.title'),
      body: confirmText({ ...offer, next }),
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: say('resize.confirm') })]
    });
    if (!choice.button.accept) {
      this._moving = false;
      return;
    }
    this._show(say('resize.saving'));
    try {
      await this._api.saveAll();
    } catch (error) {
      this._moving = false;
      this._show('');
      await showErrorMessage(
        say('resize.notMoved'),
        say('resize.notSaved', { problem: describeError(error) })
      );
      return;
    }
    let answer: { status: number; data: unknown };
    try {
      answer = await this._api.move({ offering: next.slug });
    } catch (error) {
      answer = { status: 0, data: { message: describeError(error) } };
    }
    if (answer.status !== 202) {
      this._moving = false;
      this._show('');
      await showErrorMessage(say('resize.notMoved'), messageOf(answer.data, say('resize.refused')));
      return;
    }
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
    if (warnings.length > 0 && Date.now() - this._readAt > OFFER_TTL_MS && !this._reading) {
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
    const next = this._offer?.next ?? null;
    this._button.hidden = next === null;
    this._button.textContent = next === null ? '' : actionLabel(next);
    this._tell(warnings);
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
  }

  private readonly _api: IResizeApi;
  private readonly _button: HTMLButtonElement;
  private readonly _status: HTMLSpanElement;
  private readonly _told = new Set<string>();
  private _offer: IResizeOffer | null = null;
  private _readAt = -Infinity;
  private _reading = false;
  private _moving = false;
}
