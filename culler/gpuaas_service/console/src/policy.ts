/** The policy in force, a pasted policy's preview on the live state, and the showback export. */

import { h } from '../../../../labextension/src/dom.js';

import {
  ApiError,
  type IActionCounts,
  type IConsole,
  type IFieldError,
  type IPreview,
  request
} from './api.js';
import { byId, typedById, valueOf } from './controls.js';

/** Show the policy in force from a new answer. */
export function renderPolicy(d: IConsole): void {
  const p = d.policy;
  byId('policy-in-force').textContent =
    (p.file ? `${p.file}\n` : '') +
    (p.in_force || 'No policy in force: nothing is reclaimed.') +
    (p.error ? `\nThe file as it is now is invalid (the last good policy stays):\n${p.error}` : '');
}

function line(x: IActionCounts): string {
  return `reclaim ${String(x.reclaim ?? 0)}, warn ${String(x.warn ?? 0)}, waiting ${String(x.wait ?? 0)}, left alone ${String(x.skip ?? 0)}`;
}

function fieldErrors(e: unknown): IFieldError[] | null {
  if (!(e instanceof ApiError) || e.status !== 400) {
    return null;
  }
  const body = e.body;
  if (typeof body === 'object' && body !== null && 'errors' in body && Array.isArray(body.errors)) {
    return body.errors as IFieldError[];
  }
  return null;
}

/** Check the pasted policy and show what it would do now (nothing changes). */
export async function runPreview(): Promise<void> {
  const out = byId('preview-result');
  out.replaceChildren(h('p', {}, 'Checking…'));
  let body: IPreview;
  try {
    body = await request<IPreview>('../api/console/preview', {
      method: 'POST',
      headers: { 'Content-Type': 'text/plain; charset=utf-8' },
      body: valueOf('policy-text')
    });
  } catch (e) {
    const errors = fieldErrors(e);
    if (errors) {
      out.replaceChildren(
        h('p', {}, 'The policy is not valid:'),
        h(
          'ul',
          { class: 'errors' },
          ...errors.map(x => h('li', {}, h('code', {}, x.path), `: ${x.message}`))
        )
      );
    } else {
      const status = e instanceof ApiError ? String(e.status) : 'no answer';
      out.replaceChildren(
        h('p', {}, `The preview answered ${status}: ${e instanceof Error ? e.message : String(e)}`)
      );
    }
    return;
  }
  const changed = new Map(body.changed.map(c => [c.key, c.now]));
  out.replaceChildren(
    h(
      'p',
      {},
      `With this policy, now: ${line(body.summary)}. In force: ${line(body.summary_in_force ?? {})}. Nothing was changed.`
    ),
    h('pre', {}, body.policy),
    h(
      'table',
      { id: 'preview-changes' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'Workbench'),
          h('th', {}, 'In force'),
          h('th', {}, 'With this policy'),
          h('th', {}, 'Why')
        )
      ),
      h(
        'tbody',
        {},
        ...body.workbenches
          .filter(w => w.action !== 'skip' || changed.has(w.key))
          .map(w =>
            h(
              'tr',
              {},
              h('td', {}, w.key),
              h('td', {}, changed.get(w.key) ?? w.action),
              h('td', { class: `act-${w.action}` }, w.action),
              h('td', { class: 'reason' }, `${w.code}: ${w.reason}`)
            )
          )
      )
    )
  );
}

/** Point the export links at the chosen day (today at first). */
export function exportLinks(): void {
  const input = typedById('export-day', HTMLInputElement);
  if (!input.value) {
    input.value = new Date().toISOString().slice(0, 10);
  }
  const link = (format: string): string =>
    `../api/console/export?day=${encodeURIComponent(input.value)}&format=${format}`;
  typedById('export-csv', HTMLAnchorElement).href = link('csv');
  typedById('export-json', HTMLAnchorElement).href = link('json');
}
