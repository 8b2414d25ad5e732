/**
 * The deployment checks (docs/deploy.md): what `gpuaas-admin --doctor` says of this cluster,
 * its hub and Prometheus, run by the service as its own account and token
 * (`api/console/checks`), drawn into the page's `<section id="checks">`. Operators only: for a
 * team lead (403) the section stays hidden. Asked once with the page and on "Check again"; the
 * service keeps an answer a minute.
 */

import { h } from '../../../../labextension/src/dom.js';

import { ApiError, request } from './api.js';
import type { IConsoleSection } from './consoleSection.js';
import { when } from './format.js';
import type { components } from './serviceApi.js';

/** One check of `GET api/console/checks`. */
export type IDoctorCheck = components['schemas']['service_doctor_check'];

/** `GET api/console/checks[?fresh=1]`. */
export type IChecksAnswer = components['schemas']['service_console_checks'];

/** The summary line of an answer. */
export function checksSummary(answer: IChecksAnswer): string {
  const bad = answer.checks.filter(c => c.status !== 'ok').length;
  const what = bad === 0 ? 'all ok' : `${String(bad)} not ok`;
  return `${String(answer.checks.length)} checks: ${what} (checked ${when(answer.checked_at)}).`;
}

/** The checks in the order shown: those not ok first, each group in the doctor's order. */
export function checksShown(answer: IChecksAnswer): IDoctorCheck[] {
  return [
    ...answer.checks.filter(c => c.status !== 'ok'),
    ...answer.checks.filter(c => c.status === 'ok')
  ];
}

function row(c: IDoctorCheck): HTMLElement {
  return h(
    'tr',
    { 'data-check': c.name, 'data-status': c.status },
    h('td', { class: `check-${c.status}` }, c.status),
    h('td', {}, c.name),
    h('td', {}, c.detail),
    h('td', {}, c.status === 'ok' ? '' : c.fix)
  );
}

class ChecksSection implements IConsoleSection {
  readonly id = 'checks';

  start(): void {
    const root = document.getElementById(this.id);
    if (root === null) {
      return;
    }
    root.hidden = true;
    const again = h('button', { type: 'button', id: 'checks-again' }, 'Check again');
    again.addEventListener('click', () => void this.refresh(true));
    root.replaceChildren(
      h('h2', {}, 'Deployment checks ', again),
      h('p', { id: 'checks-status', class: 'hint', role: 'status' }, 'Checking…'),
      h(
        'table',
        { id: 'checks-table' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', {}, 'Status'),
            h('th', {}, 'Check'),
            h('th', {}, 'Detail'),
            h('th', {}, 'Fix')
          )
        ),
        h('tbody', {})
      )
    );
    void this.refresh(false);
  }

  private async refresh(fresh: boolean): Promise<void> {
    const root = document.getElementById(this.id);
    const status = document.getElementById('checks-status');
    const body = document.querySelector<HTMLElement>('#checks-table tbody');
    if (root === null || status === null || body === null) {
      return;
    }
    status.textContent = 'Checking…';
    try {
      const answer = await request<IChecksAnswer>(
        `../api/console/checks${fresh ? '?fresh=1' : ''}`
      );
      root.hidden = false;
      status.textContent = checksSummary(answer);
      body.replaceChildren(...checksShown(answer).map(row));
    } catch (e) {
      if (e instanceof ApiError && (e.status === 403 || e.status === 404)) {
        root.hidden = true; // a team lead's page, or a service without the checks
        return;
      }
      root.hidden = false;
      status.textContent = `The checks are unavailable: ${e instanceof Error ? e.message : String(e)}`;
    }
  }
}

/** The deployment checks, started with the page (sections.ts lists it). */
export const checksSection: IConsoleSection = new ChecksSection();
