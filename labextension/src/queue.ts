import { Widget } from '@lumino/widgets';

import { h } from './dom';
import {
  formatWaited,
  itemTeamLabel,
  positionLabel,
  queueSignature,
  requestLabel,
  teamLabels,
  waitingFor
} from './queueModel';
import { say } from './messages';
import type { IQueue, IQueueItem } from './types';

/**
 * Why the service gave no queue, in a person's words; the service client's own message (with
 * URLs and setting names, for an administrator) goes to the browser's console.
 */
function serviceProblem(queue: IQueue | null): string | null {
  if (queue?.error == null) {
    return null;
  }
  const logged = `${queue.error_kind ?? ''} ${queue.error}`;
  if (logged !== loggedProblem) {
    loggedProblem = logged;
    console.warn(`jupyter-gpuaas: the queue: ${queue.error}`);
  }
  switch (queue.error_kind) {
    case 'forbidden':
    case 'not_configured':
      return say('queue.forbidden');
    case 'service_unavailable':
      return say('queue.unavailable');
    default:
      return say('queue.serviceError');
  }
}
let loggedProblem = '';

/**
 * The Queue section of the GPU panel: the user's pending GPU work with its queue positions,
 * and per team how many workloads are admitted and pending. Fed by the panel's poll; a failed
 * read shows a note here without touching the rest of the panel.
 */
export class QueueSection extends Widget {
  constructor() {
    super();
    this.addClass('jp-gpuaas-section');
    this.addClass('jp-gpuaas-section-queue');
    this.node.setAttribute('aria-labelledby', 'jp-gpuaas-queue-heading');
    this._render();
  }

  /** Show a new answer (`queue`), or why none could be had (`error`). */
  setQueue(queue: IQueue | null, error: string | null): void {
    if (queue !== null) {
      this._queue = queue;
    }
    this._error = error;
    // A server outside JupyterHub has no queue to ask: no section rather than a standing error.
    this.setHidden(this._queue?.error_kind === 'not_configured' && this._error === null);
    this._render();
  }

  private _render(): void {
    const signature = queueSignature(this._queue, this._error);
    if (signature === this._rendered) {
      return;
    }
    this._rendered = signature;
    const heading = h('h3', { class: 'jp-gpuaas-section-title' }, say('queue.heading'));
    heading.id = 'jp-gpuaas-queue-heading';
    const parts: Node[] = [heading];
    const queue = this._queue;
    const problem = this._error ?? serviceProblem(queue);
    if (problem !== null) {
      const note = h('div', { class: 'jp-gpuaas-note jp-gpuaas-queue-error' }, problem);
      note.setAttribute('role', 'status');
      parts.push(note);
    }
    if (queue === null) {
      if (problem === null) {
        parts.push(h('p', { class: 'jp-gpuaas-placeholder' }, say('queue.loading')));
      }
    } else if (queue.items.length === 0) {
      if (queue.error === null) {
        parts.push(h('p', { class: 'jp-gpuaas-hint jp-gpuaas-queue-empty' }, say('queue.empty')));
      }
    } else {
      const list = h('ol', { class: 'jp-gpuaas-queue' });
      list.setAttribute('aria-label', say('queue.listLabel'));
      list.append(...queue.items.map(item => this._item(item)));
      parts.push(list);
    }
    if (queue !== null && queue.teams.length > 0) {
      const teams = h('ul', { class: 'jp-gpuaas-queue-teams' });
      teams.setAttribute('aria-label', say('queue.teamsLabel'));
      const names = teamLabels(queue.teams);
      queue.teams.forEach((team, i) => {
        const row = h(
          'li',
          { class: 'jp-gpuaas-queue-team' },
          h('span', { class: 'jp-gpuaas-queue-team-name' }, names[i]),
          h(
            'span',
            { class: 'jp-gpuaas-figure' },
            say('queue.teamCounts', { admitted: team.admitted, pending: team.pending })
          )
        );
        row.dataset.team = team.team;
        teams.append(row);
      });
      parts.push(teams);
    }
    this.node.replaceChildren(...parts);
  }

  private _item(item: IQueueItem): HTMLElement {
    const name = say(
      item.kind === 'notebook' ? 'queue.server' : item.kind === 'job' ? 'queue.job' : 'queue.work',
      { name: item.name }
    );
    const row = h(
      'li',
      { class: 'jp-gpuaas-queue-item' },
      h(
        'div',
        { class: 'jp-gpuaas-line' },
        h('span', { class: 'jp-gpuaas-queue-name' }, name),
        h('span', { class: 'jp-gpuaas-queue-position' }, positionLabel(item))
      ),
      h(
        'div',
        { class: 'jp-gpuaas-meta' },
        say('queue.meta', { what: requestLabel(item), team: itemTeamLabel(item) }),
        h(
          'span',
          { class: 'jp-gpuaas-queue-waited' },
          say('queue.waited', { waited: formatWaited(item.waited_seconds) })
        )
      )
    );
    const waiting = waitingFor(item);
    if (waiting !== null) {
      row.append(h('div', { class: 'jp-gpuaas-queue-waiting-for' }, waiting));
    }
    row.dataset.workload = item.workload;
    row.dataset.position = String(item.position_in_local_queue ?? '');
    // Kueue's own words on why it waits are for operators: kept out of sight.
    if (item.reason !== null) {
      row.dataset.reason = item.reason;
    }
    return row;
  }

  private _queue: IQueue | null = null;
  private _error: string | null = null;
  private _rendered: string | null = null;
}
