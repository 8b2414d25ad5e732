/**
 * Sizing: per team, each GPU server's offering, its user's recent peak, the offering the
 * spawn form advises and the GPU-equivalents that following the advice would free.
 */

import { h } from '../../../../labextension/src/dom.js';

import type { IFit } from './api.js';
import { byId } from './controls.js';

/** Fill `#fit` from an answer of `api/console/fit`. */
export function renderFit(data: IFit): void {
  const box = byId('fit');
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
  box.replaceChildren(
    ...data.teams.map(t =>
      h(
        'div',
        { class: 'fit-team', 'data-team': t.team },
        h('h3', {}, `${t.team}: following the advice would free ${t.frees} GPU-eq.`),
        h(
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
            ...t.users.map(u =>
              h(
                'tr',
                { 'data-user': u.user },
                h('td', {}, u.key),
                h('td', {}, `${u.offering_name} (${u.gpu_equivalents} GPU-eq.)`),
                h(
                  'td',
                  {},
                  u.peak ? `${u.peak} (${String(u.sessions)} session(s))` : 'not measured'
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
        )
      )
    )
  );
  box.append(
    h(
      'p',
      { class: 'hint' },
      `Advice as the spawn form gives it, with ${String(data.headroom)}× headroom over the peak.`
    )
  );
}
