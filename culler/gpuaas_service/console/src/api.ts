/**
 * The console's API answers (docs/console.md) and the one way the page asks for them.
 * The shapes are the service's OpenAPI document's (gpuaas_service/openapi.json), aliased here
 * from the types openapi-typescript generates from it (serviceApi.ts; `make lint` checks they
 * are current).
 */

import type { Activity, ReclaimAction, ReclaimCode } from '../../../../labextension/src/types.js';
import type { components } from './serviceApi.js';

export type { Activity, ReclaimAction, ReclaimCode };

/** How many GPU workbenches get each action ({} before the first cycle). */
export type IActionCounts = components['schemas']['service_action_counts'];

/** A flavor row's five amounts, each written in one way. */
export type IAmounts = components['schemas']['service_console_amounts'];

export type IFlavorRow = components['schemas']['service_console_flavor'];

export type IHours = components['schemas']['service_hours'];

export type ITeam = components['schemas']['service_console_team'];

export type IWorkbench = components['schemas']['service_workbench'];

export type IHandoff = components['schemas']['service_console_handoff'];

export type IEvent = components['schemas']['service_console_event'];

export type IRegret = components['schemas']['service_console_regret'];

export type IPolicyInForce = components['schemas']['service_console_policy'];

export type IConsole = components['schemas']['service_console'];

export type IGpuRow = components['schemas']['service_gpu_row'];

export type IGpuNode = components['schemas']['service_gpu_node'];

export type IGpus = components['schemas']['service_console_gpus'];

export type IFitRow = components['schemas']['service_fit_row'];

export type IFitTeam = components['schemas']['service_fit_team'];

export type IFit = components['schemas']['service_console_fit'];

/** A MIG node's config now and the one its pods' demand suggests (administrators only). */
export type IMigNode = components['schemas']['service_console_mig_node'];

export type IFieldError = components['schemas']['service_field_error'];

export type IPreviewChange = components['schemas']['service_preview_change'];

/** `POST api/console/preview`: a pasted policy on the live state. */
export type IPreview = components['schemas']['service_policy_preview'];

/** The same, answered 400: the pasted policy's problems. */
export type IPreviewRefused = components['schemas']['service_preview_refused'];

export type IHistorySeries = components['schemas']['service_history_series'];

export type IHistoryChart = components['schemas']['service_history_chart'];

export type IHistoryAvailable = components['schemas']['service_history_available'];

export type IHistoryUnavailable = components['schemas']['service_history_unavailable'];

/** `GET api/console/history`. */
export type IHistory = components['schemas']['service_console_history'];

/** An answer that was not a success, as the service words it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: unknown
  ) {
    super(message);
  }
}

function xsrfToken(): string {
  return document.querySelector<HTMLMetaElement>('meta[name="xsrf-token"]')?.content ?? '';
}

/** Send one request to the console's API (`path` relative to the page) and read its JSON. */
export async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  headers.set('X-XSRFToken', xsrfToken());
  const response = await fetch(path, { ...init, headers, credentials: 'same-origin' });
  const body: unknown = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message =
      typeof body === 'object' && body !== null && 'message' in body
        ? String(body.message)
        : response.statusText;
    throw new ApiError(response.status, message, body);
  }
  return body as T;
}
