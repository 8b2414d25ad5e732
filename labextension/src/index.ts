import {
  ILayoutRestorer,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { DEFAULT_REFRESH_SECONDS, GpuPanel } from './panel';
import { ReclaimBanner } from './reclaim';
import { requestAPI } from './request';

/** The plugin id; its settings schema is labextension/schema/plugin.json. */
export const PLUGIN_ID = 'jupyter-gpuaas:plugin';

/** The command that shows the GPU panel. */
export const OPEN_COMMAND = 'jupyter-gpuaas:open-panel';

function refreshIntervalOf(settings: ISettingRegistry.ISettings): number {
  const value = settings.get('refreshInterval').composite;
  return typeof value === 'number' ? value : DEFAULT_REFRESH_SECONDS;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'A left-sidebar GPU panel: live GPU memory of each notebook kernel, per device.',
  autoStart: true,
  optional: [ILayoutRestorer, ISettingRegistry, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null
  ): void => {
    const { serviceManager } = app;
    const panel = new GpuPanel({
      fetchUsage: () => requestAPI<unknown>('usage', {}, serviceManager.serverSettings),
      fetchQueue: () => requestAPI<unknown>('queue', {}, serviceManager.serverSettings),
      sessions: serviceManager.sessions,
      kernels: serviceManager.kernels,
      open: (path, sessionType) => {
        const command = sessionType === 'console' ? 'console:open' : 'docmanager:open';
        void app.commands.execute(command, { path, activate: true });
      }
    });
    // The culler's warning goes first in the panel (docs/culler.md).
    panel.extras.insertWidget(
      0,
      new ReclaimBanner({
        fetchWarning: () => requestAPI<unknown>('reclaim', {}, serviceManager.serverSettings),
        fetchStanding: () =>
          requestAPI<unknown>('reclaim/standing', {}, serviceManager.serverSettings),
        snooze: () =>
          requestAPI<unknown>('reclaim/snooze', { method: 'POST' }, serviceManager.serverSettings),
        saveAll: () => app.commands.execute('docmanager:save-all')
      })
    );
    app.shell.add(panel, 'left', { rank: 750, type: 'GPU' });
    restorer?.add(panel, GpuPanel.ID);

    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Show GPU Panel',
      caption: 'Show the GPU memory of notebooks and the GPUs of this server',
      execute: () => {
        app.shell.activateById(GpuPanel.ID);
      }
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'GPU' });

    if (settingRegistry !== null) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = (): void => {
            panel.refreshInterval = refreshIntervalOf(settings);
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

export default plugin;
