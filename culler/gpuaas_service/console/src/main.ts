/**
 * The GPU console page (docs/console.md): polls the console's API and draws the live view; no
 * framework. Sections with their own schedule (history) start from sections.ts.
 */

import { ApiError, type IConsole, type IFit, type IGpus, type IWorkbench, request } from './api.js';
import { byId } from './controls.js';
import { renderEvents } from './events.js';
import { renderFit } from './fit.js';
import { when } from './format.js';
import { drawGpus, renderGpus } from './gpus.js';
import { renderOverview } from './overview.js';
import { exportLinks, renderPolicy, runPreview } from './policy.js';
import { startSections } from './sections.js';
import { renderTeams } from './teams.js';
import { drawWorkbenches, renderWorkbenches, sortBy } from './workbenches.js';

const POLL_MS = 5000;

function problem(e: unknown): string {
  if (e instanceof ApiError) {
    return `The console answered ${String(e.status)}: ${e.message}`;
  }
  return `Cannot reach the gpuaas service: ${e instanceof Error ? e.message : String(e)}`;
}

function status(d: IConsole): string {
  const scope = d.visible_teams ? `teams ${d.visible_teams.join(', ')}` : 'all teams';
  const decided = d.decided_at ? `plan of ${when(d.decided_at)}` : 'no reclaim cycle yet';
  const err = d.last_error ? ` · last cycle failed: ${d.last_error}` : '';
  return `Showing ${scope} · reclaim ${d.reclaim} · ${decided}${err} · updated ${when(d.now)}`;
}

async function poll(): Promise<void> {
  const [live, gpus, fit] = await Promise.allSettled([
    request<IConsole>('../api/console'),
    request<IGpus>('../api/console/gpus'),
    request<IFit>('../api/console/fit')
  ]);
  if (live.status === 'rejected') {
    byId('status').textContent = problem(live.reason);
    return;
  }
  const d = live.value;
  byId('status').textContent = status(d);
  renderOverview(d, gpus.status === 'fulfilled' ? gpus.value : null);
  renderTeams(d.teams);
  if (gpus.status === 'fulfilled') {
    renderGpus(gpus.value);
  } else {
    byId('gpu-nodes').textContent = problem(gpus.reason);
  }
  if (fit.status === 'fulfilled') {
    renderFit(fit.value);
  } else {
    byId('fit').textContent = problem(fit.reason);
  }
  renderWorkbenches(d.workbenches);
  renderEvents(d);
  renderPolicy(d);
}

function start(): void {
  for (const th of byId('workbenches').querySelectorAll<HTMLElement>('th[data-key]')) {
    th.addEventListener('click', () => {
      sortBy(th.dataset.key as keyof IWorkbench);
    });
  }
  for (const id of ['f-team', 'f-activity', 'f-offering', 'f-action', 'f-text']) {
    byId(id).addEventListener('input', drawWorkbenches);
  }
  for (const id of ['g-team', 'g-pool', 'g-state']) {
    byId(id).addEventListener('input', drawGpus);
  }
  byId('preview').addEventListener('click', () => void runPreview());
  byId('export-day').addEventListener('change', exportLinks);
  exportLinks();
  void poll();
  setInterval(() => void poll(), POLL_MS);
  startSections();
}

if (document.readyState === 'loading') {
  document.addEventListener('DOMContentLoaded', start);
} else {
  start();
}
