/**
 * Pure helpers of GPU jobs (docs/jobs.md): the payloads' shapes, their words, the dialog's
 * request and which finished jobs still need a notice.
 */

import { say } from './messages';
import type { components } from './extensionApi';

/** Where a job is: waiting for quota, admitted, running, or finished (the last three). */
export type JobState = components['schemas']['service_job_state'];

/** One job of `GET gpuaas/api/jobs`. */
export type IJob = components['schemas']['service_job'];

/** `GET gpuaas/api/jobs` as the service answers it (the server extension forwards it). */
export type IJobsAnswer = components['schemas']['service_jobs'];

/** The jobs the panel shows, or why there are none (the server extension's `error`). */
export interface IJobs {
  jobs: IJob[];
  error: string | null;
  error_kind: string | null;
}

/** One offering of `GET gpuaas/api/jobs/options`. */
export type IJobOffering = components['schemas']['service_job_offering'];

export type IJobTeam = components['schemas']['service_job_team'];

/** `GET gpuaas/api/jobs/options` as the service answers it. */
export type IJobOptionsAnswer = components['schemas']['service_job_options'];

/** What the dialog offers, or why it offers nothing (the server extension's `error`). */
export interface IJobOptions {
  teams: IJobTeam[];
  error?: string;
  error_kind?: string;
}

/** Check the shape of a `jobs` payload. */
export function parseJobs(data: unknown): IJobs {
  if (typeof data !== 'object' || data === null) {
    throw new Error('the jobs answer is not an object');
  }
  const value = data as Partial<IJobsAnswer & IJobs>;
  return {
    jobs: Array.isArray(value.jobs) ? value.jobs : [],
    error: value.error ?? null,
    // a hub that runs no GPU jobs: as a server with no service, the section is hidden
    error_kind: value.enabled === false ? 'not_configured' : (value.error_kind ?? null)
  };
}

function queuedLabel(job: IJob): string {
  return job.position_in_local_queue === null
    ? say('job.queued')
    : say('job.queuedAt', { position: job.position_in_local_queue });
}

function runningLabel(job: IJob): string {
  return job.flavors.length > 0
    ? say('job.runningOn', { flavors: job.flavors.join(', '), offering: job.offering_name })
    : say('job.running', { offering: job.offering_name });
}

/** The line under the offering: its headroom's message, and its detail after a dash. */
export function headroomText(room: IJobOffering['headroom'] | undefined): string {
  if (!room) {
    return '';
  }
  return room.detail ? `${room.message} — ${room.detail}` : room.message;
}

/** A job's state in words: `queued · #1 in the queue`, `running on local`, `succeeded`. */
export function jobStateLabel(job: IJob): string {
  switch (job.state) {
    case 'queued':
      return queuedLabel(job);
    case 'starting':
      return say('job.starting');
    case 'running':
      return runningLabel(job);
    case 'succeeded':
      return say('job.succeeded');
    case 'failed':
      return job.message ? say('job.failedWhy', { message: job.message }) : say('job.failed');
    case 'stopped':
      return job.message ? say('job.stoppedWhy', { message: job.message }) : say('job.stopped');
  }
  return String(job.state);
}

/** Finished jobs whose notice has not been shown (also those finished while no tab was open). */
export function jobsToNotify(jobs: IJob[], shown: ReadonlySet<string>): IJob[] {
  return jobs.filter(j => j.finished && j.notified === null && !shown.has(`${j.team}/${j.name}`));
}

/**
 * Parameters as typed in the dialog, one `name = value` per line; a value is JSON where it
 * parses as JSON (`3`, `0.1`, `true`, `"text"`, `[1, 2]`), else taken as text.
 */
export function parseParameters(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) {
      continue;
    }
    const at = line.indexOf('=');
    if (at <= 0) {
      throw new Error(say('jobs.notNameValue', { line }));
    }
    const name = line.slice(0, at).trim();
    const value = line.slice(at + 1).trim();
    try {
      out[name] = JSON.parse(value);
    } catch {
      out[name] = value;
    }
  }
  return out;
}

/** What the dialog sends (`POST gpuaas/api/jobs`). */
export function jobRequest(
  path: string,
  team: string,
  offering: string,
  count: number,
  timeLimit: string,
  parameters: string
): Record<string, unknown> {
  const body: Record<string, unknown> = { path, team, offering, count };
  if (timeLimit.trim() !== '') {
    body.time_limit = timeLimit.trim();
  }
  const params = parseParameters(parameters);
  if (Object.keys(params).length > 0) {
    body.parameters = params;
  }
  return body;
}

/** Seconds as a duration the service reads back: `30m`, `2h`, `1h30m`. */
export function formatLimit(seconds: number | null): string {
  if (seconds === null) {
    return '';
  }
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return `${h > 0 ? `${String(h)}h` : ''}${m > 0 ? `${String(m)}m` : ''}` || `${String(seconds)}s`;
}

/** Where the job's runner puts the dialog's parameters (jupyter_gpuaas/job_pod/runner.py). */
export const PARAMETERS_TAG = 'parameters';

/** What the dialog says about the parameters' place in the notebook. */
export interface IParametersNote {
  /** 1-based number of the first cell tagged `parameters`, or null when there is none. */
  cell: number | null;
  text: string;
}

function cellTags(cell: unknown): string[] {
  if (typeof cell !== 'object' || cell === null) {
    return [];
  }
  const metadata = (cell as { metadata?: unknown }).metadata;
  if (typeof metadata !== 'object' || metadata === null) {
    return [];
  }
  const tags = (metadata as { tags?: unknown }).tags;
  return Array.isArray(tags) ? tags.filter((t): t is string => typeof t === 'string') : [];
}

/**
 * Where the typed parameters go, in the notebook as saved (`content` of the contents API): as
 * the runner does it, right after the first cell tagged `parameters`, so they replace the
 * defaults that cell sets; without one, in a new first cell, where a later cell that sets the
 * same name wins. Null when `content` is not a notebook.
 */
export function parametersNote(content: unknown): IParametersNote | null {
  if (typeof content !== 'object' || content === null) {
    return null;
  }
  const cells = (content as { cells?: unknown }).cells;
  if (!Array.isArray(cells)) {
    return null;
  }
  const at = cells.findIndex(cell => cellTags(cell).includes(PARAMETERS_TAG));
  if (at < 0) {
    return { cell: null, text: say('jobs.noParametersCell') };
  }
  const cell = at + 1;
  return { cell, text: say('jobs.parametersCell', { cell }) };
}
