/** Every GPU workbench with its activity and the reclaim loop's next step; sortable, filterable. */

import { h } from '../../../../labextension/src/dom.js';

import type { IWorkbench } from './api.js';
import { byId, fillRows, fillSelect, valueOf } from './controls.js';
import { duration, when } from './format.js';

type SortKey = keyof IWorkbench;
let sort: { key: SortKey; dir: 1 | -1 } = { key: 'idle_seconds', dir: -1 };
let latest: readonly IWorkbench[] = [];

/** A row's value passes a filter that is unset or names it. */
function passes(filter: string, value: string): boolean {
  return !filter || value === filter;
}

function filtered(): IWorkbench[] {
  const text = valueOf('f-text').toLowerCase();
  const team = valueOf('f-team');
  const activity = valueOf('f-activity');
  const offering = valueOf('f-offering');
  const action = valueOf('f-action');
  return latest.filter(
    r =>
      passes(team, r.team) &&
      passes(activity, r.activity) &&
      passes(offering, r.offering || r.kind) &&
      passes(action, r.action) &&
      (!text || `${r.key} ${r.reason} ${r.signal}`.toLowerCase().includes(text))
  );
}

function compare(a: IWorkbench, b: IWorkbench): number {
  const x = a[sort.key] ?? '';
  const y = b[sort.key] ?? '';
  return (x < y ? -1 : x > y ? 1 : 0) * sort.dir || a.key.localeCompare(b.key);
}

function waiting(r: IWorkbench): string {
  if (r.activity === 'idle') {
    return duration(r.idle_seconds);
  }
  return r.activity === 'unknown' ? `unknown ${duration(r.unknown_seconds)}` : '';
}

/** Draw the table with the filters and the sort as they are now. */
export function drawWorkbenches(): void {
  const rows = filtered().sort(compare);
  byId('wb-count').textContent = `(${String(rows.length)} of ${String(latest.length)})`;
  fillRows(
    'workbenches',
    rows,
    r =>
      h(
        'tr',
        { 'data-key': r.key },
        h('td', {}, r.key),
        h('td', {}, r.team),
        h('td', {}, `${r.offering || r.kind} (${r.gpu_equivalents})`),
        h('td', {}, duration(r.age_seconds)),
        h('td', { title: r.signal }, `${r.activity}: ${r.signal}`),
        h('td', {}, waiting(r)),
        h('td', {}, r.policy ?? 'none'),
        h(
          'td',
          { class: `act-${r.action}` },
          r.action + (r.dry_run && r.action !== 'skip' ? ' (dry run)' : '')
        ),
        h('td', {}, when(r.reclaim_at)),
        h('td', { class: 'reason' }, `${r.code}: ${r.reason}`)
      ),
    drawWorkbenches
  );
  for (const th of byId('workbenches').querySelectorAll<HTMLElement>('th[data-key]')) {
    th.className = th.dataset.key === sort.key ? (sort.dir > 0 ? 'sorted-asc' : 'sorted-desc') : '';
  }
}

/** Take the workbenches of a new answer and draw them. */
export function renderWorkbenches(rows: readonly IWorkbench[]): void {
  latest = rows;
  fillSelect(
    'f-team',
    rows.map(r => r.team)
  );
  fillSelect(
    'f-offering',
    rows.map(r => r.offering || r.kind)
  );
  drawWorkbenches();
}

/** Sort on a column's key; again on the same column: the other way. */
export function sortBy(key: SortKey): void {
  sort = { key, dir: sort.key === key ? (sort.dir === 1 ? -1 : 1) : 1 };
  drawWorkbenches();
}
