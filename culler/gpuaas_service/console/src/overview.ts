/**
 * The first screen: who holds what, what is idle, what is queued and what goes next, in one
 * view (from the console's answer and the per-GPU answer).
 */

import { h } from '../../../../labextension/src/dom.js';

import type { IConsole, IGpus, IWorkbench } from './api.js';
import { byId } from './controls.js';
import { count, duration, when } from './format.js';

const SHOWN = 5;

function card(title: string, id: string, ...body: (Node | string)[]): HTMLElement {
  return h('div', { class: 'card', id }, h('h3', {}, title), ...body);
}

function sum(values: readonly string[]): number {
  return values.reduce((total, v) => total + Number(v), 0);
}

function figure(value: number): string {
  return String(Number(value.toFixed(2)));
}

function holds(data: IConsole, gpus: IGpus | null): HTMLElement {
  const training = new Map<string, number>();
  for (const row of gpus?.devices ?? []) {
    if (row.holder_kind === 'training') {
      training.set(row.team, (training.get(row.team) ?? 0) + Number(row.gpu_equivalents));
    }
  }
  const rows = data.teams
    .filter(t => t.now.servers > 0 || training.has(t.team))
    .map(t =>
      h(
        'tr',
        { 'data-team': t.team },
        h('td', {}, t.team),
        h('td', {}, `${t.now.allocated} in ${count(t.now.servers, 'workbench', 'workbenches')}`),
        h('td', {}, figure(training.get(t.team) ?? 0))
      )
    );
  // Where the per-GPU answer is in, the sum of its nodes' figures, as "Every GPU" writes them
  // (a sum of the teams' rounded figures may differ from them in the last digit: 0.28, 0.29).
  const total = gpus
    ? sum(gpus.nodes.map(n => n.gpu_equivalents))
    : sum(data.teams.map(t => t.now.allocated)) + sum([...training.values()].map(String));
  return card(
    'Who holds what',
    'holds',
    h('p', { class: 'big' }, `${figure(total)} GPU-eq. held`),
    rows.length
      ? h(
          'table',
          {},
          h(
            'thead',
            {},
            h('tr', {}, h('th', {}, 'Team'), h('th', {}, 'Notebooks'), h('th', {}, 'Training'))
          ),
          h('tbody', {}, ...rows)
        )
      : h('p', { class: 'hint' }, 'Nobody holds a GPU.')
  );
}

function idle(data: IConsole): HTMLElement {
  const rows = data.workbenches
    .filter(w => w.activity === 'idle')
    .sort((a, b) => (b.idle_seconds ?? 0) - (a.idle_seconds ?? 0));
  const held = sum(rows.map(w => w.gpu_equivalents));
  return card(
    'What is idle',
    'idle',
    h(
      'p',
      { class: 'big' },
      `${figure(held)} GPU-eq. idle in ${count(rows.length, 'workbench', 'workbenches')}`
    ),
    h(
      'ul',
      {},
      ...rows
        .slice(0, SHOWN)
        .map(w =>
          h(
            'li',
            {},
            `${w.key} (${w.team}, ${w.offering || w.kind}): idle ${duration(w.idle_seconds)}`
          )
        )
    )
  );
}

/** The moment the plan and the counts beside it are of (one reclaim cycle). */
function cycleHint(data: IConsole): string {
  return data.decided_at
    ? `From the reclaim loop's cycle of ${when(data.decided_at)}.`
    : 'No reclaim cycle yet.';
}

function queued(data: IConsole): HTMLElement {
  const teams = data.teams.filter(t => t.queued.workloads > 0);
  return card(
    'What is queued',
    'queued',
    h(
      'p',
      { class: 'big' },
      `${count(
        teams.reduce((n, t) => n + t.queued.workloads, 0),
        'workload'
      )}, ${figure(sum(teams.map(t => t.queued.gpu_equivalents)))} GPU-eq.`
    ),
    h(
      'ul',
      {},
      ...teams.map(t =>
        h(
          'li',
          { 'data-team': t.team },
          `${t.team}: ${String(t.queued.workloads)} (${t.queued.gpu_equivalents} GPU-eq.)` +
            (t.queued.waiting_for_a_whole_node > 0
              ? `, ${String(t.queued.waiting_for_a_whole_node)} waiting for a whole node`
              : '') +
            (t.queued.oldest_wait_seconds !== null
              ? `, oldest waiting ${duration(t.queued.oldest_wait_seconds)}`
              : '')
        )
      )
    ),
    h('p', { class: 'hint' }, cycleHint(data))
  );
}

const NEXT_ORDER: Record<string, number> = { reclaim: 0, warn: 1, wait: 2, 'clear-warning': 3 };

function nextStep(w: IWorkbench): string {
  const at = w.reclaim_at ? ` at ${when(w.reclaim_at)}` : '';
  const dry = w.dry_run ? ' (dry run)' : '';
  return `${w.action}${dry} ${w.key}${at}: ${w.reason}`;
}

function next(data: IConsole): HTMLElement {
  const steps = data.workbenches
    .filter(w => w.action in NEXT_ORDER)
    .sort(
      (a, b) =>
        (NEXT_ORDER[a.action] ?? 9) - (NEXT_ORDER[b.action] ?? 9) ||
        (a.reclaim_at ?? '').localeCompare(b.reclaim_at ?? '')
    );
  const reclaim = data.reclaim === 'on' ? '' : ' Reclaim is off: no policy in force.';
  return card(
    'What goes next',
    'next',
    h(
      'p',
      { class: 'big' },
      steps.length ? `${count(steps.length, 'step')} planned` : 'Nothing planned'
    ),
    h(
      'ul',
      {},
      ...steps.slice(0, SHOWN).map(w => h('li', { class: `act-${w.action}` }, nextStep(w)))
    ),
    h('p', { class: 'hint' }, `${cycleHint(data)}${reclaim}`)
  );
}

/** Fill `#overview` from the latest answers (`gpus`: `null` until the per-GPU view answered). */
export function renderOverview(data: IConsole, gpus: IGpus | null): void {
  byId('overview').replaceChildren(holds(data, gpus), idle(data), queued(data), next(data));
}
