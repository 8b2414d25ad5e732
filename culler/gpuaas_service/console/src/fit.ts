/**
 * Sizing: per team, each GPU server's offering, its user's recent peak, the offering the
 * spawn form advises and the GPU-equivalents that following the advice would free.
 */

import { h } from '../../../../labextension/src/dom.js';

import type { IFit, IFitRow, IMigNode } from './api.js';
import { byId } from './controls.js';
import { count } from './format.js';

/** Up to this many teams are shown unfolded; more are folded until opened. */
const UNFOLDED_TEAMS = 3;

/** The teams a user opened (kept open when the next answer is drawn). */
const opened = new Set<string>();

function usersTable(users: readonly IFitRow[]): HTMLElement {
  return h(
    'table',
    {},
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ...['User', 'Offering', 'Recent peak', 'Advised', 'Would free', 'Why'].map(x =>
          h('th', {}, x)
        )
      )
    ),
    h(
      'tbody',
      {},
      ...users.map(u =>
        h(
          'tr',
          { 'data-user': u.user },
          h('td', {}, u.key),
          h('td', {}, `${u.offering_name} (${u.gpu_equivalents} GPU-eq.)`),
          h(
            'td',
            {},
            u.peak ? `${u.peak} (${count(u.sessions, 'session')})` : 'no session ended yet'
          ),
          h(
            'td',
            { class: u.advised && u.advised !== u.offering ? 'advice' : '' },
            u.advised_name ?? '—'
          ),
          h('td', {}, u.frees === '0' ? '—' : `${u.frees} GPU-eq.`),
          h('td', { class: 'reason' }, u.reason)
        )
      )
    )
  );
}

/** Per MIG node: the config now, the slices wanted, the advised config and how to apply it. */
function migTable(nodes: readonly IMigNode[]): HTMLElement {
  const demand = (d: Record<string, number>): string =>
    Object.entries(d)
      .map(([profile, n]) => `${String(n)} × ${profile}`)
      .join(', ') || 'none measured';
  return h(
    'section',
    { class: 'mig-advice' },
    h('h3', {}, 'MIG geometry'),
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['Node', 'GPUs', 'Config now', 'Slices wanted', 'Advised', 'To apply'].map(x =>
            h('th', {}, x)
          )
        )
      ),
      h(
        'tbody',
        {},
        ...nodes.map(n =>
          h(
            'tr',
            { 'data-node': n.node },
            h('td', {}, n.node),
            h('td', {}, `${String(n.gpus)} × ${n.model}`),
            h('td', {}, n.now ?? 'none'),
            h('td', {}, demand(n.demand)),
            h(
              'td',
              { class: n.advised && n.advised !== n.now ? 'advice' : '' },
              n.advised ?? '—',
              h('div', { class: 'reason' }, n.reason)
            ),
            h('td', { class: 'reason' }, n.line)
          )
        )
      )
    )
  );
}

/** Fill `#fit` from an answer of `api/console/fit`. */
export function renderFit(data: IFit): void {
  const box = byId('fit');
  renderTeams(box, data);
  if (data.mig?.length) {
    box.append(migTable(data.mig));
  }
}

/** Per team, its GPU servers against the advice (or why there is none). */
function renderTeams(box: HTMLElement, data: IFit): void {
  if (!data.catalog) {
    box.replaceChildren(
      h(
        'p',
        { class: 'hint' },
        'No advice: the service has no catalog (c.GPUaaSService.catalog_file, the same file as the spawner’s).'
      )
    );
    return;
  }
  if (!data.teams.length) {
    box.replaceChildren(h('p', { class: 'hint' }, 'No GPU server is running.'));
    return;
  }
  const unfolded = data.teams.length <= UNFOLDED_TEAMS;
  box.replaceChildren(
    ...data.teams.map(t => {
      const team = h(
        'details',
        { class: 'fit-team', 'data-team': t.team },
        h('summary', {}, `${t.team}: following the advice would free ${t.frees} GPU-eq.`)
      );
      // A folded team's table is made when it is opened: 50 teams' servers are thousands of
      // rows, redrawn at each poll.
      const fill = (): void => {
        if (team.open && team.childElementCount === 1) {
          team.append(usersTable(t.users));
        }
      };
      team.addEventListener('toggle', () => {
        if (team.open) {
          opened.add(t.team);
        } else {
          opened.delete(t.team);
        }
        fill();
      });
      team.open = unfolded || opened.has(t.team);
      fill();
      return team;
    })
  );
  box.append(
    h(
      'p',
      { class: 'hint' },
      `Advice as the spawn form gives it, with ${String(data.headroom)}× headroom over the peak.`
    )
  );
}
