/**
 * Every GPU, per node: whole GPUs, MIG slices, shares and fractions, who holds each and since
 * when, idle since when, memory and utilisation where measured, and what is free on each node;
 * filtered by team, pool and state (free rows belong to no team: a team filter hides them).
 */

import { h } from '../../../../labextension/src/dom.js';

import type { IGpuRow, IGpus } from './api.js';
import { byId, fillRows, fillSelect, valueOf } from './controls.js';
import { count, duration, gib, secondsSince, when } from './format.js';

let latest: IGpus | null = null;

/** Where a holder is that Kueue admitted and no node runs yet (its pod is being placed). */
export const NOT_PLACED = 'not on a node yet';

/** "As of 10:42:05 (the reclaim loop's last cycle): " — the moment every row is of. */
export function asOf(iso: string | null): string {
  return iso ? `As of ${when(iso)}, the reclaim loop's last cycle. ` : '';
}

function memory(row: IGpuRow): string {
  const used = gib(row.memory_bytes);
  const cap = gib(row.memory_cap_bytes);
  if (row.state === 'free') {
    return cap ? `${cap} free` : '';
  }
  if (used && cap) {
    return `${used} of ${cap}`;
  }
  return used || (cap ? `cap ${cap}` : '');
}

function stateText(row: IGpuRow, now: string): string {
  if (row.state === 'idle') {
    return `idle for ${duration(secondsSince(row.idle_since, now))}`;
  }
  return row.state;
}

function shown(data: IGpus): IGpuRow[] {
  const team = valueOf('g-team');
  const pool = valueOf('g-pool');
  const state = valueOf('g-state');
  return data.devices.filter(
    r =>
      (!team || r.team === team) &&
      (!pool || r.pool.includes(pool)) &&
      (!state || r.state === state)
  );
}

function row(r: IGpuRow, now: string): HTMLElement {
  return h(
    'tr',
    { 'data-holder': r.holder, 'data-node': r.node, 'data-state': r.state, 'data-team': r.team },
    h('td', {}, r.node || NOT_PLACED),
    h(
      'td',
      { title: r.uuids.join(', ') || undefined },
      r.device,
      h('span', { class: 'kind' }, ` ${r.kind}`)
    ),
    h('td', {}, r.pool.join(', ')),
    h(
      'td',
      {},
      r.holder_kind === 'free'
        ? 'nobody'
        : r.holder + (r.holder_kind === 'training' ? ' (training)' : '')
    ),
    h('td', {}, r.team),
    h('td', {}, r.gpu_equivalents),
    h('td', { title: when(r.since) }, r.since ? duration(secondsSince(r.since, now)) : ''),
    h(
      'td',
      {
        class: `state-${r.state}`,
        title: r.idle_since ? `idle since ${when(r.idle_since)}` : undefined
      },
      stateText(r, now)
    ),
    h('td', {}, memory(r)),
    h('td', {}, r.utilization_percent !== null ? `${String(r.utilization_percent)}%` : ''),
    h('td', { class: `act-${r.next_step}` }, r.next_step)
  );
}

/** Draw the table with the filters as they are now. */
export function drawGpus(): void {
  if (latest === null) {
    return;
  }
  const rows = shown(latest);
  const now = latest.now;
  byId('gpu-count').textContent = `(${String(rows.length)} of ${String(latest.devices.length)})`;
  const nodes = latest.nodes
    .map(
      n =>
        `${n.node || NOT_PLACED}: ` +
        (n.holdings > 0
          ? `${n.gpu_equivalents} GPU-eq. held in ${count(n.holdings, 'holding')} (${String(n.idle)} idle)`
          : 'nothing held') +
        (n.free_gpu_equivalents !== '0' ? `, ${n.free_gpu_equivalents} GPU-eq. free` : '')
    )
    .join(' · ');
  byId('gpu-nodes').textContent = asOf(latest.as_of) + (nodes || 'No GPU is held or free.');
  fillRows('gpus', rows, r => row(r, now), drawGpus);
}

/** Take a new answer of `api/console/gpus` and draw it. */
export function renderGpus(data: IGpus): void {
  latest = data;
  fillSelect(
    'g-team',
    data.devices.map(r => r.team)
  );
  fillSelect(
    'g-pool',
    data.devices.flatMap(r => r.pool)
  );
  drawGpus();
}
