import { Notification } from '@jupyterlab/apputils';
import type { Title, Widget } from '@lumino/widgets';

import { say } from './messages';
import { browserPermission, type ReclaimWatch } from './reclaim';
import { holdingWords } from './reclaimModel';
import {
  type AlertAction,
  alertView,
  type IAlertView,
  NO_ALERT,
  noteWords,
  prefixedTitle
} from './reclaimState';

/** How long the short "kept" and "the warning is over" notifications stay (ms). */
const SHORT_NOTICE_MS = 8000;

/** The class of the GPU panel's sidebar tab while a warning is on, or after the stop. */
export const TAB_CLASS = { warned: 'jp-gpuaas-tab-warned', stopped: 'jp-gpuaas-tab-stopped' };

/**
 * The reclaim warning wherever the user is in JupyterLab, whether the GPU panel is open or
 * not: a JupyterLab notification with "Keep my GPU" and "Save now" (one per warning, updated
 * as its words change, dismissed when the warning ends), a mark on the GPU tab and in the page
 * title, and the browser's own notification where the user allowed them while the tab is in
 * the background. After the stop, the same places say what happened and how to go on.
 */
export class ReclaimAlerts {
  constructor(watch: ReclaimWatch, panelTitle: Title<Widget>) {
    this._watch = watch;
    this._panelTitle = panelTitle;
    this._baseCaption = panelTitle.caption;
    this._unsubscribe = watch.subscribe(() => {
      this._update();
    });
    // JupyterLab sets the page title as the current tab changes: put the mark back.
    const titleElement = document.querySelector('title');
    if (titleElement !== null) {
      this._observer = new MutationObserver(() => {
        this._applyTitle();
      });
      this._observer.observe(titleElement, { childList: true, characterData: true, subtree: true });
    }
  }

  dispose(): void {
    this._unsubscribe();
    this._observer?.disconnect();
    this._disposed = true;
    this._show(NO_ALERT);
  }

  private _update(): void {
    this._show(alertView(this._watch.state, Date.now(), this._watch.hubHome));
  }

  private _show(view: IAlertView): void {
    if (view.toast?.key.startsWith('warning') === true) {
      // The answer that ends a warning has no cause left: keep what the warning was about.
      this._warnedHolding = holdingWords(this._watch.state.cause?.kind ?? 'gpu');
    }
    this._toast(view);
    this._titlePrefix = view.titlePrefix;
    this._applyTitle();
    this._panelTitle.className = view.tab === null ? '' : TAB_CLASS[view.tab];
    this._panelTitle.caption = view.tab === null ? this._baseCaption : view.tabCaption;
    this._browser(view);
  }

  private _toast(view: IAlertView): void {
    const toast = view.toast;
    const previousKey = this._toastKey;
    if (toast === null) {
      if (this._toastId !== null) {
        Notification.dismiss(this._toastId);
        this._toastId = null;
        this._toastKey = '';
        this._toastMessage = '';
        if (previousKey.startsWith('warning') && !this._disposed) {
          this._afterWarning();
        }
      }
      return;
    }
    const options = { autoClose: false as const, actions: toast.actions.map(a => this._action(a)) };
    if (toast.key !== previousKey) {
      if (this._toastId !== null) {
        Notification.dismiss(this._toastId);
      }
      this._toastKey = toast.key;
      this._toastMessage = toast.message;
      this._toastId = Notification.emit(toast.message, toast.type, options);
      return;
    }
    // The same warning: new words replace the old; a notification the user closed stays closed.
    if (
      toast.message !== this._toastMessage &&
      this._toastId !== null &&
      Notification.manager.has(this._toastId)
    ) {
      this._toastMessage = toast.message;
      Notification.update({
        id: this._toastId,
        message: toast.message,
        type: toast.type,
        ...options
      });
    }
  }

  /** The warning ended while the server runs: say why, briefly. */
  private _afterWarning(): void {
    const { note, skewMs, stopped } = this._watch.state;
    if (stopped !== null) {
      return;
    }
    const message =
      note?.kind === 'kept'
        ? noteWords(note, Date.now(), skewMs)
        : say('warn.over', { holding: this._warnedHolding });
    Notification.emit(message, 'success', { autoClose: SHORT_NOTICE_MS });
  }

  private _action(action: AlertAction): Notification.IAction {
    switch (action) {
      case 'keep':
        return {
          label: say('action.keep'),
          caption: say('action.keepCaption'),
          displayType: 'accent',
          callback: () => {
            void this._watch.keep();
          }
        };
      case 'save':
        return {
          label: say('action.save'),
          caption: say('action.saveCaption'),
          callback: event => {
            event.preventDefault(); // the warning stays up
            void this._watch.saveNow();
          }
        };
      case 'startAgain':
        return {
          label: say('action.startAgain'),
          caption: say('action.startAgainCaption'),
          displayType: 'accent',
          callback: () => {
            if (this._watch.hubHome !== null) {
              window.location.assign(this._watch.hubHome);
            }
          }
        };
    }
  }

  private _applyTitle(): void {
    const title = prefixedTitle(document.title, this._titlePrefix, this._appliedPrefix);
    this._appliedPrefix = this._titlePrefix;
    if (title !== document.title) {
      document.title = title;
    }
  }

  /**
   * The browser's notification, once per warning or stop, while this tab is in the
   * background; one the user has seen in the tab is not repeated there.
   */
  private _browser(view: IAlertView): void {
    const b = view.browser;
    if (b === null || this._browserShown.has(b.tag)) {
      return;
    }
    if (document.visibilityState === 'visible' && document.hasFocus()) {
      this._browserShown.add(b.tag);
      return;
    }
    if (browserPermission() !== 'granted') {
      return;
    }
    this._browserShown.add(b.tag);
    try {
      new window.Notification(b.title, { body: b.body, tag: b.tag });
    } catch (error) {
      console.warn('jupyter-gpuaas: the browser refused a notification', error);
    }
  }

  private readonly _watch: ReclaimWatch;
  private readonly _panelTitle: Title<Widget>;
  private readonly _baseCaption: string;
  private readonly _unsubscribe: () => void;
  private readonly _observer: MutationObserver | null = null;
  private readonly _browserShown = new Set<string>();
  private _toastId: string | null = null;
  private _toastKey = '';
  private _toastMessage = '';
  /** What the last warning was about ("this MIG slice"), for the words as it ends. */
  private _warnedHolding = say('holding.gpu');
  private _titlePrefix = '';
  private _appliedPrefix = '';
  private _disposed = false;
}
