import {
  ConnectionLost,
  IConnectionLost,
  ILayoutRestorer,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin,
  JupyterLab
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  Notification,
  showDialog,
  ToolbarButton
} from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import type { DocumentRegistry, IDocumentWidget } from '@jupyterlab/docregistry';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { type IJobsApi, JobsSection, runAsGpuJob } from './jobs';
import { type IKernelStateApi, KernelStateRestorer } from './kernelState';
import { DEFAULT_RESTORE_MODE, type RestoreMode, restoreModeOf } from './kernelStateModel';
import { DEFAULT_REFRESH_SECONDS, GpuPanel } from './panel';
import { ReclaimAlerts } from './alerts';
import { ReclaimBanner, ReclaimWatch, reclaimAwareConnectionLost } from './reclaim';
import { say } from './messages';
import { failureStatus, requestAPI, requestAPIAnswer } from './request';
import { WayUp } from './resize';
import { spawnPendingUrl } from './resizeModel';

/** The plugin id; its settings schema is labextension/schema/plugin.json. */
export const PLUGIN_ID = 'jupyter-gpuaas:plugin';

/** The plugin that answers a lost connection to the server (IConnectionLost). */
export const CONNECTION_LOST_ID = 'jupyter-gpuaas:connection-lost';

/** The tab's reclaim watch, once the main plugin made it (the lost-connection handler asks it). */
let reclaimWatch: ReclaimWatch | null = null;

/** The command that shows the GPU panel. */
export const OPEN_COMMAND = 'jupyter-gpuaas:open-panel';

/** "Run as GPU job…" (docs/jobs.md): the notebook given by `path`, else the current one. */
export const RUN_AS_JOB_COMMAND = 'jupyter-gpuaas:run-as-gpu-job';

/** "Save variables now" and "Restore saved variables" (docs/kernel-state.md). */
export const SAVE_VARIABLES_COMMAND = 'jupyter-gpuaas:save-variables';
export const RESTORE_VARIABLES_COMMAND = 'jupyter-gpuaas:restore-variables';

/** The hub's home page (start a stopped server there), or null outside JupyterHub. */
function hubHomeUrl(): string | null {
  const prefix = PageConfig.getOption('hubPrefix');
  return prefix === '' ? null : PageConfig.getOption('hubHost') + URLExt.join(prefix, 'home');
}

function refreshIntervalOf(settings: ISettingRegistry.ISettings): number {
  const value = settings.get('refreshInterval').composite;
  return typeof value === 'number' ? value : DEFAULT_REFRESH_SECONDS;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'A left-sidebar GPU panel: live GPU memory of each notebook kernel, per device.',
  autoStart: true,
  optional: [ILayoutRestorer, ISettingRegistry, ICommandPalette, IDefaultFileBrowser],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null,
    fileBrowser: IDefaultFileBrowser | null
  ): void => {
    const { serviceManager } = app;
    // The way up to a bigger GPU, beside the panel's cap warnings (docs/api.md).
    const serverSettings = serviceManager.serverSettings;
    const wayUp = new WayUp({
      fetchOffer: () => requestAPI<unknown>('resize', {}, serverSettings),
      move: body =>
        requestAPIAnswer(
          'resize',
          { method: 'POST', body: JSON.stringify(body) },
          serverSettings,
          [400, 403, 409, 502, 503]
        ),
      saveAll: () => app.commands.execute('docmanager:save-all'),
      serverAnswers: () =>
        requestAPI<unknown>('usage', {}, serverSettings).then(
          () => true,
          () => false
        ),
      pendingUrl: spawnPendingUrl(
        PageConfig.getOption('hubHost'),
        PageConfig.getOption('hubPrefix'),
        PageConfig.getOption('hubUser'),
        PageConfig.getOption('hubServerName')
      ),
      go: url => {
        window.location.assign(url);
      }
    });
    const panel = new GpuPanel({
      fetchUsage: () => requestAPI<unknown>('usage', {}, serviceManager.serverSettings),
      fetchQueue: () => requestAPI<unknown>('queue', {}, serviceManager.serverSettings),
      sessions: serviceManager.sessions,
      kernels: serviceManager.kernels,
      open: (path, sessionType) => {
        const command = sessionType === 'console' ? 'console:open' : 'docmanager:open';
        void app.commands.execute(command, { path, activate: true });
      },
      capAction: warnings => wayUp.render(warnings)
    });
    // The culler's warning: first in the panel, and wherever the user is (docs/culler.md).
    const settings = serviceManager.serverSettings;
    const watch = new ReclaimWatch({
      fetchWarning: () => requestAPI<unknown>('reclaim', {}, settings),
      fetchStanding: () => requestAPI<unknown>('reclaim/standing', {}, settings),
      fetchEstimate: () => requestAPI<unknown>('kernel-state/estimate', {}, settings),
      snooze: () => requestAPIAnswer('reclaim/snooze', { method: 'POST' }, settings, [409]),
      saveAll: () => app.commands.execute('docmanager:save-all'),
      failureOf: error => ({ status: failureStatus(error) }),
      busyNow: () =>
        Array.from(serviceManager.kernels.running()).some(k => k.execution_state === 'busy'),
      hubHome: hubHomeUrl()
    });
    reclaimWatch = watch;
    panel.extras.insertWidget(0, new ReclaimBanner(watch));
    const alerts = new ReclaimAlerts(watch, panel.title);
    panel.disposed.connect(() => {
      alerts.dispose();
      watch.dispose();
      reclaimWatch = null;
    });
    const jobsApi: IJobsApi = {
      get: endpoint => requestAPI<unknown>(endpoint, {}, settings),
      post: (endpoint, body) =>
        requestAPI<unknown>(
          endpoint,
          { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) },
          settings
        ),
      del: endpoint => requestAPI<unknown>(endpoint, { method: 'DELETE' }, settings),
      open: path => {
        void app.commands.execute('docmanager:open', { path, activate: true });
      },
      notebook: async path => {
        const model = await serviceManager.contents.get(path, { type: 'notebook', content: true });
        return model.content as unknown;
      }
    };
    const jobs = new JobsSection(jobsApi);
    panel.extras.addWidget(jobs); // below the Queue section
    addJobCommands(app, jobsApi, jobs, palette, fileBrowser);
    app.shell.add(panel, 'left', { rank: 750, type: 'GPU' });
    restorer?.add(panel, GpuPanel.ID);

    app.commands.addCommand(OPEN_COMMAND, {
      label: say('command.openPanel'),
      caption: say('command.openPanelCaption'),
      execute: () => {
        app.shell.activateById(GpuPanel.ID);
      }
    });
    palette?.addItem({ command: OPEN_COMMAND, category: say('command.category') });

    let restoreMode: RestoreMode = DEFAULT_RESTORE_MODE;
    addKernelStateParts(app, palette, () => restoreMode);

    if (settingRegistry !== null) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = (): void => {
            panel.refreshInterval = refreshIntervalOf(settings);
            restoreMode = restoreModeOf(settings.get('restoreVariables').composite);
          };
          apply();
          settings.changed.connect(apply);
          panel.disposed.connect(() => {
            settings.changed.disconnect(apply);
          });
        })
        .catch((reason: unknown) => {
          console.error(`jupyter-gpuaas: could not load the settings of ${PLUGIN_ID}`, reason);
        });
    }
  }
};

/**
 * A notebook's saved variables: restored into the first kernel of each notebook opened (as the
 * setting says), and the commands to save and restore by hand (docs/kernel-state.md).
 */
function addKernelStateParts(
  app: JupyterFrontEnd,
  palette: ICommandPalette | null,
  mode: () => RestoreMode
): void {
  const settings = app.serviceManager.serverSettings;
  const post = (endpoint: string, body: unknown, accept: number[] = []): Promise<unknown> =>
    requestAPIAnswer(
      endpoint,
      { method: 'POST', body: JSON.stringify(body) },
      settings,
      accept
    ).then(answer => answer.data);
  const api: IKernelStateApi = {
    info: path =>
      requestAPI<unknown>(`kernel-state?path=${encodeURIComponent(path)}`, {}, settings),
    restore: (kernelId, path, force) =>
      post('kernel-state/restore', { kernel_id: kernelId, path, force }, [409]),
    snapshot: kernelId => post('kernel-state/snapshot', { kernel_id: kernelId })
  };
  const restorer = new KernelStateRestorer(api, mode);
  app.docRegistry.addWidgetExtension('Notebook', {
    createNew: (
      _widget: IDocumentWidget,
      context: DocumentRegistry.IContext<DocumentRegistry.IModel>
    ) => {
      restorer.opened(context).catch((reason: unknown) => {
        console.warn(`jupyter-gpuaas: no restore for ${context.path}`, reason);
      });
    }
  });
  const current = (): { path: string; kernelId: string } | null => {
    const widget = app.shell.currentWidget as Partial<IDocumentWidget> | null;
    const kernel = widget?.context?.sessionContext.session?.kernel;
    const path = widget?.context?.path;
    if (!kernel || typeof path !== 'string' || !path.endsWith('.ipynb')) {
      return null;
    }
    return { path, kernelId: kernel.id };
  };
  const need = (): { path: string; kernelId: string } | null => {
    const found = current();
    if (found === null) {
      Notification.warning(say('state.noNotebook'), { autoClose: 5000 });
    }
    return found;
  };
  app.commands.addCommand(SAVE_VARIABLES_COMMAND, {
    label: say('command.saveVariables'),
    caption: say('command.saveVariablesCaption'),
    execute: async () => {
      const found = need();
      if (found !== null) {
        await restorer.save(found.path, found.kernelId);
      }
    }
  });
  app.commands.addCommand(RESTORE_VARIABLES_COMMAND, {
    label: say('command.restoreVariables'),
    caption: say('command.restoreVariablesCaption'),
    execute: async () => {
      const found = need();
      if (found !== null) {
        await restorer.restore(found.path, found.kernelId, true);
      }
    }
  });
  for (const command of [SAVE_VARIABLES_COMMAND, RESTORE_VARIABLES_COMMAND]) {
    palette?.addItem({ command, category: say('command.category') });
  }
}

/** The notebook a command runs on: the file browser's selection, else the current notebook. */
function notebookPath(
  app: JupyterFrontEnd,
  fileBrowser: IDefaultFileBrowser | null,
  args: { path?: unknown }
): string | null {
  if (isNotebookPath(args.path)) {
    return args.path;
  }
  const selected = fileBrowser?.selectedItems().next();
  if (selected && !selected.done && isNotebookPath(selected.value.path)) {
    return selected.value.path;
  }
  const current = app.shell.currentWidget as Partial<IDocumentWidget> | null;
  const path = current?.context?.path;
  return isNotebookPath(path) ? path : null;
}

function isNotebookPath(path: unknown): path is string {
  return typeof path === 'string' && path.endsWith('.ipynb');
}

function addJobCommands(
  app: JupyterFrontEnd,
  api: IJobsApi,
  jobs: JobsSection,
  palette: ICommandPalette | null,
  fileBrowser: IDefaultFileBrowser | null
): void {
  app.commands.addCommand(RUN_AS_JOB_COMMAND, {
    label: say('command.runAsJob'),
    caption: say('command.runAsJobCaption'),
    execute: async args => {
      const path = notebookPath(app, fileBrowser, args);
      if (path === null) {
        return;
      }
      // the job runs what is saved: save an open notebook first
      const current = app.shell.currentWidget as Partial<IDocumentWidget> | null;
      if (current?.context?.path === path && current.context.model.dirty) {
        await current.context.save();
      }
      await runAsGpuJob(path, api, () => void jobs.refresh());
    }
  });
  palette?.addItem({ command: RUN_AS_JOB_COMMAND, category: say('command.category') });
  app.contextMenu.addItem({
    command: RUN_AS_JOB_COMMAND,
    selector: '.jp-DirListing-item[data-file-type="notebook"]',
    rank: 60
  });
  app.docRegistry.addWidgetExtension('Notebook', {
    createNew: (
      widget: IDocumentWidget,
      context: DocumentRegistry.IContext<DocumentRegistry.IModel>
    ) => {
      const button = new ToolbarButton({
        className: 'jp-gpuaas-run-as-job',
        label: say('command.jobButton'),
        tooltip: say('command.runAsJob'),
        onClick: () => {
          void app.commands.execute(RUN_AS_JOB_COMMAND, { path: context.path });
        }
      });
      widget.toolbar.insertItem(10, 'gpuaas-run-as-job', button);
      return button;
    }
  });
}

/**
 * JupyterLab's own answer to a lost connection: outside JupyterHub its default dialog; under
 * JupyterHub the dialog of JupyterLab's hub extension, whose service this plugin takes over —
 * the same words (JupyterLab's, translated as JupyterLab translates them) and the same
 * "Restart" (the hub extension's command).
 */
function jupyterLabConnectionLost(
  app: JupyterFrontEnd,
  info: JupyterLab.IInfo | null
): IConnectionLost {
  if (PageConfig.getOption('hubPrefix') === '') {
    return ConnectionLost;
  }
  let showing = false;
  return async (_manager, _error, translator) => {
    if (showing) {
      return;
    }
    showing = true;
    const trans = translator?.load('jupyterlab');
    const words = (text: string, ...args: string[]): string =>
      trans ? trans.__(text, ...args) : text.replace('%1', args[0] ?? '');
    if (info) {
      info.isConnected = false;
    }
    try {
      const result = await showDialog({
        title: words('Server unavailable or unreachable'),
        body: words(
          'Your server at %1 is not running.\nWould you like to restart it?',
          PageConfig.getBaseUrl()
        ),
        buttons: [
          Dialog.okButton({ label: words('Restart') }),
          Dialog.cancelButton({ label: words('Dismiss') })
        ]
      });
      if (result.button.accept) {
        await app.commands.execute('hub:restart');
      }
    } finally {
      if (info) {
        info.isConnected = true;
      }
      showing = false;
    }
  };
}

/**
 * A lost connection to the server: after a reclaim this tab was warned of, the product's own
 * notice ("Your server was stopped at about … [Start again]") and nothing on top of it;
 * otherwise JupyterLab's own dialog. Registered after JupyterLab's plugins, it replaces the
 * hub extension's IConnectionLost (a later provider of a token wins).
 */
const connectionLost: JupyterFrontEndPlugin<IConnectionLost> = {
  id: CONNECTION_LOST_ID,
  description: "Shows the product's notice instead of JupyterLab's after a reclaim.",
  autoStart: true,
  provides: IConnectionLost,
  optional: [JupyterLab.IInfo],
  activate: (app: JupyterFrontEnd, info: JupyterLab.IInfo | null): IConnectionLost =>
    reclaimAwareConnectionLost(() => reclaimWatch, jupyterLabConnectionLost(app, info))
};

export default [plugin, connectionLost];
