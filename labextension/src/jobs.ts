/**
 * GPU jobs in JupyterLab (docs/jobs.md): the "Run as GPU job…" dialog, the jobs section under
 * the Queue section (state, position, log, cancel, open the executed copy) and the notice
 * when a job finishes — also for jobs that finished while no tab was open.
 */
import { Dialog, Notification, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import {
  formatLimit,
  headroomText,
  type IJobOffering,
  type IJob,
  type IJobOptions,
  type IJobTeam,
  jobRequest,
  jobStateLabel,
  jobsToNotify,
  type IParametersNote,
  parametersNote,
  parseJobs
} from './jobsModel';
import { h } from './dom';
import { say } from './messages';
import { describeError, serverNotRunning } from './request';

/** How the jobs part reaches the server extension (injected: tests give their own). */
export interface IJobsApi {
  get(endpoint: string): Promise<unknown>;
  post(endpoint: string, body?: unknown): Promise<unknown>;
  del(endpoint: string): Promise<unknown>;
  open(path: string): void;
  /** The notebook as saved (its JSON), to say where the parameters go. */
  notebook(path: string): Promise<unknown>;
}

/** The dialog's body: team, offering (with its headroom), count, time limit, parameters. */
class JobForm extends Widget {
  constructor(path: string, options: IJobOptions, note: IParametersNote | null) {
    super();
    this.addClass('jp-gpuaas-job-form');
    this._path = path;
    this._options = options;
    this._team = h('select', { class: 'jp-mod-styled jp-gpuaas-job-team' });
    this._team.setAttribute('aria-label', say('jobs.team'));
    for (const team of options.teams) {
      this._team.append(new Option(team.display_name, team.team));
    }
    this._offering = h('select', { class: 'jp-mod-styled jp-gpuaas-job-offering' });
    this._offering.setAttribute('aria-label', 'GPU');
    this._count = h('input', { class: 'jp-mod-styled jp-gpuaas-job-count' });
    this._count.type = 'number';
    this._count.setAttribute('aria-label', say('jobs.count'));
    this._limit = h('input', { class: 'jp-mod-styled jp-gpuaas-job-limit' });
    this._limit.setAttribute('aria-label', say('jobs.timeLimit'));
    this._limit.placeholder = 'e.g. 2h';
    this._params = h('textarea', { class: 'jp-mod-styled jp-gpuaas-job-parameters' });
    this._params.setAttribute('aria-label', say('jobs.parameters'));
    this._params.placeholder = 'lr = 0.01\nepochs = 10';
    this._room = h('div', { class: 'jp-gpuaas-job-headroom' });
    this._room.setAttribute('role', 'status');
    // a warning only where the values could be overridden; else a plain hint
    const where = h(
      'p',
      {
        class: `${note?.cell === null ? 'jp-gpuaas-note' : 'jp-gpuaas-hint'} jp-gpuaas-job-parameters-note`
      },
      note?.text ?? ''
    );
    where.hidden = note === null;
    this._cap = h('div', { class: 'jp-gpuaas-note jp-gpuaas-job-cap' });
    this._cap.setAttribute('role', 'alert');
    this.node.append(
      h('p', { class: 'jp-gpuaas-job-path' }, say('jobs.notebook', { path })),
      h('label', { class: '' }, `${say('jobs.team')} `, this._team),
      h('label', { class: '' }, `${say('jobs.gpu')} `, this._offering),
      this._room,
      h('label', { class: '' }, `${say('jobs.count')} `, this._count),
      h('label', { class: '' }, `${say('jobs.timeLimit')} `, this._limit),
      h('label', { class: '' }, `${say('jobs.parameters')} `, this._params),
      where,
      this._cap
    );
    this._team.onchange = () => {
      this._fillOfferings();
    };
    this._offering.onchange = () => {
      this._showOffering();
    };
    this._fillOfferings();
  }

  private _teamOf(): IJobTeam | undefined {
    return this._options.teams.find(t => t.team === this._team.value);
  }

  private _fillOfferings(): void {
    const team = this._teamOf();
    this._offering.replaceChildren(
      ...(team?.offerings ?? []).map(o => new Option(o.display_name, o.slug))
    );
    if (team?.default_offering) {
      this._offering.value = team.default_offering;
    }
    this._limit.value = formatLimit(team?.default_time_limit ?? null);
    this._cap.textContent = team?.cap_message ?? '';
    this._cap.hidden = !team?.cap_message;
    this._showOffering();
  }

  private _showOffering(): void {
    const offering = this._teamOf()?.offerings.find(o => o.slug === this._offering.value);
    this._showCount(offering);
    const room = offering?.headroom;
    this._room.textContent = headroomText(room);
    this._room.dataset.fit = room?.fit ?? '';
  }

  /** The count's bounds and default: the offering's, else one. */
  private _showCount(offering: IJobOffering | undefined): void {
    this._count.min = String(offering?.min_count ?? 1);
    this._count.max = String(offering?.max_count ?? 1);
    this._count.value = String(offering?.default_count ?? 1);
  }

  /** The request to send, or throws with what is wrong in the parameters. */
  getValue(): Record<string, unknown> {
    return jobRequest(
      this._path,
      this._team.value,
      this._offering.value,
      Number(this._count.value),
      this._limit.value,
      this._params.value
    );
  }

  get capReached(): boolean {
    return Boolean(this._teamOf()?.cap_message);
  }

  private readonly _path: string;
  private readonly _options: IJobOptions;
  private readonly _team: HTMLSelectElement;
  private readonly _offering: HTMLSelectElement;
  private readonly _count: HTMLInputElement;
  private readonly _limit: HTMLInputElement;
  private readonly _params: HTMLTextAreaElement;
  private readonly _room: HTMLDivElement;
  private readonly _cap: HTMLDivElement;
}

/** "Run as GPU job…": ask what to run on, submit, say where to follow it. */
export async function runAsGpuJob(
  path: string,
  api: IJobsApi,
  onSubmitted: () => void
): Promise<void> {
  let options: IJobOptions;
  // where the parameters go; the dialog opens without the note if the file cannot be read
  const note = api.notebook(path).then(parametersNote, () => null);
  try {
    options = (await api.get('jobs/options')) as IJobOptions;
  } catch (error) {
    await showErrorMessage(
      say('jobs.errorTitle'),
      say('jobs.optionsFailed', { problem: describeError(error) })
    );
    return;
  }
  if (options.error !== undefined) {
    await showErrorMessage(say('jobs.errorTitle'), options.error);
    return;
  }
  if (options.teams.length === 0) {
    await showErrorMessage(say('jobs.errorTitle'), say('jobs.noTeam'));
    return;
  }
  const form = new JobForm(path, options, await note);
  const result = await showDialog({
    title: say('jobs.dialogTitle'),
    body: form,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: say('jobs.submit') })],
    focusNodeSelector: 'select'
  });
  if (!result.button.accept) {
    return;
  }
  let body: Record<string, unknown>;
  try {
    body = form.getValue();
  } catch (error) {
    await showErrorMessage(say('jobs.errorTitle'), describeError(error));
    return;
  }
  try {
    const job = (await api.post('jobs', body)) as IJob;
    Notification.info(say('jobs.submitted', { name: job.name }), { autoClose: 5000 });
    onSubmitted();
  } catch (error) {
    await showErrorMessage(say('jobs.notSubmitted'), describeError(error));
  }
}

/**
 * The jobs section: the user's GPU jobs with their state; log, cancel and the executed copy.
 * Polls every `interval` ms while it is attached, and shows each finished job's notice once.
 */
export class JobsSection extends Widget {
  constructor(api: IJobsApi, interval = 5000) {
    super();
    this._api = api;
    this.addClass('jp-gpuaas-section');
    this.addClass('jp-gpuaas-section-jobs');
    this._poll = new Poll({
      factory: () => this.refresh(),
      frequency: { interval, backoff: true, max: 60_000 },
      standby: 'never'
    });
    this._render();
  }

  /** Read the jobs now (after a submit, cancel). */
  async refresh(): Promise<void> {
    try {
      const jobs = parseJobs(await this._api.get('jobs'));
      this._jobs = jobs.jobs;
      this._error = jobs.error;
      this.setHidden(jobs.error_kind === 'not_configured');
      this._notify();
    } catch (error) {
      // A stopped server is said once, by the usage note above; the jobs stay as last read.
      if (!serverNotRunning(error)) {
        this._error = say('jobs.loadFailed', { problem: describeError(error) });
      }
    }
    this._render();
  }

  private _notify(): void {
    for (const job of jobsToNotify(this._jobs, this._shown)) {
      const key = `${job.team}/${job.name}`;
      this._shown.add(key);
      const state = jobStateLabel(job);
      const what = say('jobs.finished', { name: job.name, notebook: job.notebook, state });
      const actions = job.collected
        ? [
            {
              label: say('jobs.openOutput'),
              callback: () => {
                this._api.open(job.collected ?? '');
              }
            }
          ]
        : [];
      if (job.state === 'succeeded') {
        Notification.success(what, { actions, autoClose: false });
      } else {
        Notification.error(what, { actions, autoClose: false });
      }
      void this._api.post(`jobs/${job.team}/${job.name}/notified`).catch(() => {
        this._shown.delete(key); // shown again next time: better twice than never
      });
    }
  }

  private _render(): void {
    const heading = h('h3', { class: 'jp-gpuaas-section-title' }, say('jobs.heading'));
    const parts: Node[] = [heading];
    if (this._error !== null) {
      parts.push(h('div', { class: 'jp-gpuaas-note jp-gpuaas-jobs-error' }, this._error));
    }
    if (this._jobs.length === 0) {
      parts.push(h('p', { class: 'jp-gpuaas-hint' }, say('jobs.none')));
    } else {
      const list = h('ul', { class: 'jp-gpuaas-jobs' });
      list.setAttribute('aria-label', say('jobs.listLabel'));
      list.append(...this._jobs.map(job => this._item(job)));
      parts.push(list);
    }
    this.node.replaceChildren(...parts);
  }

  private _item(job: IJob): HTMLElement {
    const state = h('span', { class: 'jp-gpuaas-job-state' }, jobStateLabel(job));
    const buttons = h('div', { class: 'jp-gpuaas-job-actions' });
    const button = (label: string, action: () => void): HTMLButtonElement => {
      const b = h('button', { class: 'jp-mod-styled jp-gpuaas-job-button' }, label);
      b.onclick = action;
      return b;
    };
    buttons.append(button(say('jobs.log'), () => void this._showLog(job)));
    if (job.collected) {
      buttons.append(
        button(say('jobs.openOutput'), () => {
          this._api.open(job.collected ?? '');
        })
      );
    }
    const end = say(job.finished ? 'jobs.remove' : 'jobs.cancel');
    buttons.append(button(end, () => void this._cancel(job)));
    const row = h(
      'li',
      { class: 'jp-gpuaas-job' },
      h(
        'div',
        { class: 'jp-gpuaas-line' },
        h('span', { class: 'jp-gpuaas-job-name' }, job.notebook || job.name),
        state
      ),
      h(
        'div',
        { class: 'jp-gpuaas-meta' },
        say('jobs.meta', { name: job.name, offering: job.offering_name })
      ),
      buttons
    );
    row.dataset.job = job.name;
    row.dataset.state = job.state;
    return row;
  }

  private async _showLog(job: IJob): Promise<void> {
    try {
      const answer = (await this._api.get(`jobs/${job.team}/${job.name}/log`)) as { log: string };
      const pre = h('pre', { class: 'jp-gpuaas-job-log' }, answer.log || say('jobs.logEmpty'));
      await showDialog({
        title: say('jobs.logTitle', { name: job.name }),
        body: new Widget({ node: pre }),
        buttons: [Dialog.okButton({ label: say('jobs.close') })]
      });
    } catch (error) {
      await showErrorMessage(say('jobs.logFailed'), describeError(error));
    }
  }

  private async _cancel(job: IJob): Promise<void> {
    const words = job.finished
      ? ({
          verb: 'jobs.remove',
          title: 'jobs.removeTitle',
          body: 'jobs.removeBody',
          failed: 'jobs.notRemoved'
        } as const)
      : ({
          verb: 'jobs.cancel',
          title: 'jobs.cancelTitle',
          body: 'jobs.cancelBody',
          failed: 'jobs.notCancelled'
        } as const);
    const ok = await showDialog({
      title: say(words.title, { name: job.name }),
      body: say(words.body),
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: say(words.verb) })]
    });
    if (!ok.button.accept) {
      return;
    }
    try {
      await this._api.del(`jobs/${job.team}/${job.name}`);
    } catch (error) {
      await showErrorMessage(say(words.failed), describeError(error));
    }
    await this.refresh();
  }

  dispose(): void {
    this._poll.dispose();
    super.dispose();
  }

  private readonly _api: IJobsApi;
  private readonly _poll: Poll;
  private readonly _shown = new Set<string>();
  private _jobs: IJob[] = [];
  private _error: string | null = null;
}
