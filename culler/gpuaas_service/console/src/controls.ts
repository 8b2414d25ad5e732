/** The page's fixed elements and filter controls. */

import { h } from '../../../../labextension/src/dom.js';

import { count } from './format.js';

/** The element with id `id`, which the page has (console.html). */
export function byId(id: string): HTMLElement {
  const element = document.getElementById(id);
  if (element === null) {
    throw new Error(`console.html has no #${id}`);
  }
  return element;
}

/** The element with id `id`, of the type the page gives it (`HTMLSelectElement`, ...). */
export function typedById<T extends HTMLElement>(id: string, type: new () => T): T {
  const element = byId(id);
  if (!(element instanceof type)) {
    throw new Error(`console.html's #${id} is not a ${type.name}`);
  }
  return element;
}

/** Add the values a `<select>` does not offer yet (sorted), keeping what is selected. */
export function fillSelect(id: string, values: Iterable<string>): void {
  const select = typedById(id, HTMLSelectElement);
  const keep = select.value;
  const have = new Set(Array.from(select.options, o => o.value));
  for (const value of [...new Set(values)].sort()) {
    if (value && !have.has(value)) {
      select.append(h('option', {}, value));
    }
  }
  select.value = keep;
}

/** The value of the control with id `id`. */
export function valueOf(id: string): string {
  const element = byId(id);
  return element instanceof HTMLInputElement ||
    element instanceof HTMLSelectElement ||
    element instanceof HTMLTextAreaElement
    ? element.value
    : '';
}

/** A bar of parts against a scale from 0 to `scale`, with its scale written under it. */
export function scaledBar(
  label: string,
  parts: readonly { kind: string; value: number; title: string }[],
  scale: number,
  unit: string
): HTMLElement {
  const bar = h('div', { class: 'bar', role: 'img', 'aria-label': label });
  for (const part of parts) {
    const span = h('span', { class: part.kind, title: part.title });
    span.style.width = `${String(Math.min(100, (100 * Math.max(0, part.value)) / scale))}%`;
    bar.append(span);
  }
  const ticks = h('div', { class: 'scale', 'aria-hidden': 'true' });
  // Both ends only: a middle tick ran into the end's label (with its unit) in narrow cells.
  for (const at of [0, scale]) {
    const tick = h(
      'span',
      {},
      `${String(Number(at.toPrecision(3)))}${at === scale ? ` ${unit}` : ''}`
    );
    tick.style.left = `${String((100 * at) / scale)}%`;
    ticks.append(tick);
  }
  return h('div', { class: 'scaled' }, bar, ticks);
}

/**
 * Let the browser skip laying out and painting the `<section>` around the element with id `id`
 * while it is far from the viewport (console.css: `section.lazy`, `content-visibility: auto`).
 * Called once its content is drawn, not before: a section that has it from the start is judged
 * near the viewport while still empty at the top of the page, and its first content is then laid
 * out whole, thousands of rows below the screen, before the first paint.
 */
export function drawnLazily(id: string): void {
  byId(id).closest('section')?.classList.add('lazy');
}

/** Rows a long table draws at first, and how many more each "Show more" adds. */
export const ROWS_AT_ONCE = 200;

/** How many rows each long table draws now, by the table's id (grown by "Show more"). */
const rowsDrawn = new Map<string, number>();

/**
 * Fill the `<tbody>` of the table with id `id` with the first rows of `rows` (each made by
 * `make`), as many as its "Show more" asked for (`ROWS_AT_ONCE` at first), and under them a row
 * that says how many are left, with buttons that draw more (`redraw`: the table's own draw).
 * A table of thousands of rows is neither built at once nor rebuilt whole at every poll.
 */
export function fillRows<T>(
  id: string,
  rows: readonly T[],
  make: (row: T) => HTMLElement,
  redraw: () => void
): void {
  const table = byId(id);
  const body = table.querySelector('tbody');
  if (body === null) {
    return;
  }
  const limit = rowsDrawn.get(id) ?? ROWS_AT_ONCE;
  const drawn = rows.slice(0, limit).map(make);
  const left = rows.length - drawn.length;
  if (left > 0) {
    const more = (label: string, count: number): HTMLElement => {
      const button = h('button', { type: 'button' }, label);
      button.addEventListener('click', () => {
        rowsDrawn.set(id, limit + count);
        redraw();
      });
      return button;
    };
    const columns = table.querySelectorAll('thead th').length;
    drawn.push(
      h(
        'tr',
        { class: 'more' },
        h(
          'td',
          { colspan: String(columns) },
          `${count(left, 'more row', 'more rows')} not drawn. `,
          more(`Show ${String(Math.min(left, ROWS_AT_ONCE))} more`, ROWS_AT_ONCE),
          ' ',
          more(`Show all ${String(rows.length)}`, left)
        )
      )
    );
  }
  body.replaceChildren(...drawn);
}
