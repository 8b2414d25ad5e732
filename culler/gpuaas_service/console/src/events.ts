/** Reclaims and hand-offs: the regret figure, the hand-offs and the recent events. */

import { h } from '../../../../labextension/src/dom.js';

import type { IConsole } from './api.js';
import { byId } from './controls.js';
import { duration, when } from './format.js';

/** Fill the reclaims section from a new answer. */
export function renderEvents(d: IConsole): void {
  const rg = d.regret;
  byId('regret').textContent = rg
    ? `Regret: ${String(rg.returned_within_window)} of ${String(rg.reclaims)} reclaimed users started a server again within ${duration(rg.window_seconds)}.`
    : '';
  byId('handoffs')
    .querySelector('tbody')
    ?.replaceChildren(
      ...d.handoffs.map(x =>
        h(
          'tr',
          {},
          h('td', {}, x.workload),
          h('td', {}, x.team),
          h('td', {}, when(x.reclaimed_at)),
          h('td', {}, when(x.admitted_at)),
          h('td', {}, duration(x.latency_seconds)),
          h('td', { title: x.reason }, x.status),
          h('td', { class: 'reason' }, x.reason)
        )
      )
    );
  byId('events')
    .querySelector('tbody')
    ?.replaceChildren(
      ...d.events.map(e =>
        h(
          'tr',
          { class: e.regret ? 'regret' : '' },
          h('td', {}, when(e.at)),
          h('td', { title: e.reason }, e.event + (e.result ? ` ${e.result}` : '')),
          h('td', {}, e.server ? `${e.user}/${e.server}` : e.user),
          h('td', {}, e.team),
          h('td', {}, e.offering),
          h('td', {}, e.gpu_equivalents),
          h(
            'td',
            {},
            e.workload +
              (e.latency_seconds !== null ? ` (admitted after ${duration(e.latency_seconds)})` : '')
          ),
          h(
            'td',
            {},
            e.returned_after_seconds !== null
              ? duration(e.returned_after_seconds) + (e.regret ? ' (regret)' : '')
              : ''
          ),
          // A withdrawal's or a failed hand-off's reason, said where the row is read (not
          // only in a tooltip, which a keyboard or touch user never sees).
          h('td', { class: 'reason' }, e.reason)
        )
      )
    );
}
