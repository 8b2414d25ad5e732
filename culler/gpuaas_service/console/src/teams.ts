/**
 * The teams: use against quota in the units a person reads, rows with nothing in use folded
 * away, borrowed and lent quota said as such, and today's GPU-hours on a bar with a scale.
 */

import { h } from '../../../../labextension/src/dom.js';

import type { IFlavorRow, ITeam } from './api.js';
import { byId, scaledBar } from './controls.js';
import { count, duration, niceCeiling } from './format.js';

function quotaTable(rows: readonly IFlavorRow[]): HTMLElement {
  return h(
    'table',
    { class: 'quota' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ...[
          'Pool',
          'Resource',
          'Quota',
          'Notebooks',
          'Training',
          'Borrowed from others',
          'Lent to others',
          'Use'
        ].map(x => h('th', {}, x))
      )
    ),
    h(
      'tbody',
      {},
      ...rows.map(f => {
        const used = f.notebooks + f.training;
        const scale = Math.max(f.nominal, used, 1);
        const gpuEq = f.gpu_eq.nominal !== '0' ? ` (${f.gpu_eq.nominal} GPU-eq.)` : '';
        return h(
          'tr',
          { 'data-resource': f.resource },
          h('td', {}, f.flavor),
          h('td', { title: f.resource }, f.resource.replace(/^nvidia\.com\//, '')),
          h('td', {}, f.readable.nominal + gpuEq),
          h('td', {}, f.readable.notebooks),
          h('td', {}, f.readable.training),
          h('td', { class: f.borrowed ? 'borrowed' : '' }, f.borrowed ? f.readable.borrowed : '—'),
          h('td', { class: f.lent ? 'lent' : '' }, f.lent ? f.readable.lent : '—'),
          h(
            'td',
            { class: 'use' },
            scaledBar(
              `${f.flavor} ${f.resource}: ${f.readable.notebooks} notebooks and ${f.readable.training} training of ${f.readable.nominal}`,
              [
                {
                  kind: 'notebooks',
                  value: f.notebooks,
                  title: `notebooks: ${f.readable.notebooks}`
                },
                { kind: 'training', value: f.training, title: `training: ${f.readable.training}` }
              ],
              scale,
              `(quota ${f.readable.nominal})`
            )
          )
        );
      })
    )
  );
}

function teamCard(t: ITeam, scaleHours: number): HTMLElement {
  const hours = t.today;
  const unknown = Math.max(0, hours.allocated_hours - hours.busy_hours - hours.idle_hours);
  const used = t.flavors.filter(f => f.in_use);
  const empty = t.flavors.filter(f => !f.in_use);
  const q = t.queued;
  return h(
    'div',
    { class: 'team', 'data-team': t.team },
    h('h3', {}, t.team),
    h(
      'p',
      {},
      `Now: ${count(t.now.servers, 'GPU workbench', 'GPU workbenches')} holding ${t.now.allocated} GPU-eq. (${t.now.busy} busy, ${t.now.idle} idle, ${t.now.unknown} unknown). ` +
        `Queued: ${count(q.workloads, 'workload')}, ${q.gpu_equivalents} GPU-eq.` +
        (q.oldest_wait_seconds !== null
          ? `, oldest waiting ${duration(q.oldest_wait_seconds)}.`
          : '')
    ),
    h(
      'p',
      {},
      `Today: ${hours.allocated_hours.toFixed(2)} GPU-eq. hours allocated, ${hours.busy_hours.toFixed(2)} busy, ${hours.idle_hours.toFixed(2)} idle; ` +
        `${count(hours.reclaims, 'reclaim')}, ${count(hours.failed_starts, 'failed start')}`
    ),
    scaledBar(
      `${t.team}: ${String(hours.allocated_hours)} GPU-eq. hours allocated today, ${String(hours.busy_hours)} busy, ${String(hours.idle_hours)} idle`,
      [
        {
          kind: 'busy',
          value: hours.busy_hours,
          title: `busy: ${hours.busy_hours.toFixed(2)} GPU-eq. h`
        },
        {
          kind: 'idle',
          value: hours.idle_hours,
          title: `idle: ${hours.idle_hours.toFixed(2)} GPU-eq. h`
        },
        { kind: 'other', value: unknown, title: `unknown: ${unknown.toFixed(2)} GPU-eq. h` }
      ],
      scaleHours,
      'GPU-eq. h'
    ),
    used.length
      ? quotaTable(used)
      : h(
          'p',
          { class: 'hint' },
          t.flavors.length ? 'No GPU quota in use.' : 'No GPU quota of its own.'
        ),
    empty.length ? folded(t.team, empty) : false
  );
}

/** The teams whose folded quota rows a user opened (kept open when the next answer is drawn). */
const opened = new Set<string>();

/**
 * The quota rows with nothing in them, folded under one line; their table is made when the
 * line is opened (50 teams' folded rows are a third of the page's elements, redrawn each poll).
 */
function folded(team: string, rows: readonly IFlavorRow[]): HTMLElement {
  const box = h(
    'details',
    { class: 'folded' },
    h('summary', {}, `${count(rows.length, 'quota row')} with nothing in use`)
  );
  const fill = (): void => {
    if (box.open && box.childElementCount === 1) {
      box.append(quotaTable(rows));
    }
  };
  box.addEventListener('toggle', () => {
    if (box.open) {
      opened.add(team);
    } else {
      opened.delete(team);
    }
    fill();
  });
  box.open = opened.has(team);
  fill();
  return box;
}

/** Fill `#teams`; every team's bar has the same scale, so that bars compare. */
export function renderTeams(teams: readonly ITeam[]): void {
  const box = byId('teams');
  const scale = niceCeiling(Math.max(0, ...teams.map(t => t.today.allocated_hours)));
  box.replaceChildren(...teams.map(t => teamCard(t, scale)));
  if (!teams.length) {
    box.append(h('p', { class: 'hint' }, 'No teams.'));
  }
}
