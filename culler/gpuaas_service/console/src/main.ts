/**
 * The GPU console page (docs/console.md): polls the console's API and draws the live view; no
 * framework. Sections with their own schedule (history) start from sections.ts.
 */

import { ApiError, type IConsole, type IFit, type IGpus, type IWorkbench, request } from './api.js';
import { byId, drawnLazily } from './controls.js';
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

/** Draw the parts of the live view that `api/console` answers. */
function drawLive(d: IConsole): void {
  byId('status').textContent = status(d);
  renderTeams(d.teams);
  renderWorkbenches(d.workbenches);
  renderEvents(d);
  renderPolicy(d);
  drawnLazily('workbenches');
  drawnLazily('events');
}

/**
 * Ask the three answers of the live view at once and draw each part as its answer arrives:
 * no part waits for another's answer, save the overview, which is drawn from this poll's
 * `api/console` and `api/console/gpus` once both are in (or the second failed).
 */
async function poll(): Promise<void> {
  let live: IConsole | null = null;
  let gpus: IGpus | null | undefined; // undefined: not answered yet
  const overview = (): void => {
    if (live !== null && gpus !== undefined) {
      renderOverview(live, gpus);
    }
  };
  await Promise.all([
    request<IConsole>('../api/console').then(
      d => {
        live = d;
        drawLive(d);
        overview();
      },
      (e: unknown) => {
        byId('status').textContent = problem(e);
      }
    ),
    request<IGpus>('../api/console/gpus').then(
      g => {
        gpus = g;
        renderGpus(g);
        drawnLazily('gpus');
        overview();
      },
      (e: unknown) => {
        gpus = null;
        byId('gpu-nodes').textContent = problem(e);
        overview();
      }
    ),
    request<IFit>('../api/console/fit').then(
      f => {
        renderFit(f);
        drawnLazily('fit');
      },
      (e: unknown) => {
        byId('fit').textContent = problem(e);
      }
    )
  ]);
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
