/**
 * A notebook's variables across a move (docs/kernel-state.md): when a notebook opens with a
 * new kernel, its saved variables are restored into it before its first cell runs (the
 * "restoreVariables" setting: automatic, ask, off), and a notification says what came back,
 * what did not and how long it took. Two commands save and restore by hand.
 */

import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type { Kernel } from '@jupyterlab/services';

import {
  askMessage,
  type IStateNotice,
  type IKernelStateRestore,
  parseInfo,
  parseOutcomes,
  parseRestore,
  restoreAnswerOf,
  restoreExpression,
  type RestoreMode,
  restoreNotice,
  snapshotNotice
} from './kernelStateModel';
import { basename } from './format';
import { say } from './messages';
import { describeError } from './request';

/** The server extension's kernel-state endpoints (injected, so that tests need no server). */
export interface IKernelStateApi {
  info(path: string): Promise<unknown>;
  restore(kernelId: string, path: string, force: boolean): Promise<unknown>;
  snapshot(kernelId: string): Promise<unknown>;
}

const SUCCESS_MS = 10000;

/** Show a notice, with the full lists behind "Details" where there are any. */
export function showNotice(notice: IStateNotice, notebook: string): void {
  const actions: Notification.IAction[] =
    notice.details.length === 0
      ? []
      : [
          {
            label: say('state.details'),
            callback: () => {
              void showDialog({
                title: say('state.detailsTitle', { notebook }),
                body: notice.details.join('\n'),
                buttons: [Dialog.okButton()]
              });
            }
          }
        ];
  Notification.emit(notice.message, notice.type, {
    autoClose: notice.type === 'success' ? SUCCESS_MS : false,
    actions
  });
}

export class KernelStateRestorer {
  constructor(
    private readonly _api: IKernelStateApi,
    private readonly _mode: () => RestoreMode
  ) {}

  /** A notebook was opened: once its session is ready, offer its saved variables. */
  async opened(context: DocumentRegistry.IContext<DocumentRegistry.IModel>): Promise<void> {
    const session = context.sessionContext;
    await session.ready;
    const kernel = session.session?.kernel;
    if (kernel) {
      await this.offer(context.path, kernel);
      return;
    }
    // No kernel yet (one is still being chosen or started): offer to the first that comes.
    const first = (_: unknown, change: { newValue: Kernel.IKernelConnection | null }): void => {
      if (change.newValue !== null) {
        session.kernelChanged.disconnect(first);
        void this.offer(context.path, change.newValue);
      }
    };
    session.kernelChanged.connect(first);
  }

  /**
   * Restore as the setting says: at once, after asking, or not at all. At once, the request
   * is sent before this returns to the event loop: no cell can be sent before it.
   */
  async offer(path: string, kernel: Kernel.IKernelConnection): Promise<void> {
    const mode = this._mode();
    if (mode === 'off') {
      return;
    }
    if (mode === 'automatic') {
      await this.restoreAsOpened(path, kernel);
      return;
    }
    const kernelId = kernel.id;
    let question: string | null = null;
    try {
      const info = parseInfo(await this._api.info(path));
      question = info === null ? null : askMessage(info);
    } catch (error) {
      console.warn(`jupyter-gpuaas: could not read the saved variables of ${path}`, error);
    }
    if (question === null) {
      return;
    }
    Notification.info(question, {
      autoClose: false,
      actions: [
        {
          label: say('state.askRestore'),
          callback: () => void this.restore(path, kernelId, true)
        },
        { label: say('state.askSkip'), callback: () => undefined }
      ]
    });
  }

  /**
   * Restore in the kernel itself, as a silent execute on the notebook's own connection: the
   * kernel runs one connection's requests in the order they were sent, so a cell run at once
   * (a first Shift+Enter) waits behind the restore rather than running first, which would
   * leave the saved variables out.
   */
  async restoreAsOpened(
    path: string,
    kernel: Kernel.IKernelConnection
  ): Promise<IKernelStateRestore | null> {
    let answer: IKernelStateRestore | null;
    try {
      const future = kernel.requestExecute({
        code: '',
        silent: true,
        store_history: false,
        allow_stdin: false,
        stop_on_error: false,
        user_expressions: { answer: restoreExpression(path) }
      });
      const reply = await future.done;
      answer = restoreAnswerOf(reply.content, path, kernel.id);
    } catch (error) {
      answer = { path, kernel_id: kernel.id, status: 'unavailable', message: describeError(error) };
    }
    const notice = answer === null ? null : restoreNotice(answer);
    if (notice !== null) {
      showNotice(notice, basename(path));
    }
    return answer;
  }

  /** Ask the server to restore, and say what came of it. */
  async restore(
    path: string,
    kernelId: string,
    force: boolean
  ): Promise<IKernelStateRestore | null> {
    let answer: IKernelStateRestore | null;
    try {
      answer = parseRestore(await this._api.restore(kernelId, path, force));
    } catch (error) {
      const problem = describeError(error);
      showNotice(
        {
          message: say('state.notRestored', { notebook: basename(path), problem }),
          type: 'warning',
          details: []
        },
        basename(path)
      );
      return null;
    }
    const notice = answer === null ? null : restoreNotice(answer);
    if (notice !== null) {
      showNotice(notice, basename(path));
    }
    return answer;
  }

  /** "Save variables now" for one kernel. */
  async save(path: string, kernelId: string): Promise<void> {
    try {
      for (const outcome of parseOutcomes(await this._api.snapshot(kernelId))) {
        showNotice(snapshotNotice(outcome), basename(outcome.notebook || path));
      }
    } catch (error) {
      showNotice(
        {
          message: say('state.notSaved', {
            notebook: basename(path),
            problem: describeError(error)
          }),
          type: 'error',
          details: []
        },
        basename(path)
      );
    }
  }
}
