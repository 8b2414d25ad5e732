import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { errorWords } from './errorWords';
import { say } from './messages';

/** The URL namespace of the server extension, under the server's base URL. */
export const API_NAMESPACE = 'gpuaas/api';

/**
 * Call an endpoint of the jupyter-gpuaas server extension and return its JSON body.
 *
 * Every request of the labextension goes through here, so authentication (token, XSRF
 * cookie) and error reporting are handled in one place.
 *
 * @param endpoint - the path under `{base_url}gpuaas/api/`, such as `usage`
 * @param init - the fetch options (method, body, signal)
 * @param settings - the server connection settings; defaults to the page's
 * @throws {ServerConnection.NetworkError} when the server cannot be reached
 * @throws {ServerConnection.ResponseError} when the server answers with an error status
 */
export async function requestAPI<T>(
  endpoint: string,
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  return (await requestAPIAnswer(endpoint, init, settings)).data as T;
}

/**
 * As `requestAPI`, but an answer with a status in `accept` (besides the 2xx ones) is returned
 * with its status rather than thrown: `POST reclaim/snooze` answers 409 with why.
 */
export async function requestAPIAnswer(
  endpoint: string,
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings(),
  accept: readonly number[] = []
): Promise<{ status: number; data: unknown }> {
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endpoint);
  const response = await send(url, init, settings);
  const data = await answerBody(endpoint, response);
  if (!response.ok && !accept.includes(response.status)) {
    throw new ServerConnection.ResponseError(response, errorMessage(data));
  }
  return { status: response.status, data };
}

/** The request sent; a failure to reach the server is a NetworkError. */
async function send(
  url: string,
  init: RequestInit,
  settings: ServerConnection.ISettings
): Promise<Response> {
  try {
    return await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(
      error instanceof TypeError ? error : new TypeError(String(error))
    );
  }
}

/**
 * The answer's body: its JSON, or its text when empty or (for an error status) not JSON.
 * A success that is not JSON is a ResponseError.
 */
async function answerBody(endpoint: string, response: Response): Promise<unknown> {
  const text = await response.text();
  if (text.length === 0) {
    return text;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    if (response.ok) {
      throw new ServerConnection.ResponseError(
        response,
        `${endpoint}: the server's answer is not JSON`
      );
    }
    return text;
  }
}

/** The HTTP status of a failed request: 0 when nothing answered, -1 for other errors. */
export function failureStatus(error: unknown): number {
  if (error instanceof ServerConnection.ResponseError) {
    return error.response.status;
  }
  return error instanceof ServerConnection.NetworkError ? 0 : -1;
}

/**
 * The message of an error body: Jupyter Server's (`{"message": ...}`) or the server
 * extension's words for a gpuaas service problem (`{"error": ...}`). A body that is not JSON
 * (a proxy's error page) has none.
 */
function errorMessage(data: unknown): string | undefined {
  if (typeof data === 'object' && data !== null) {
    for (const key of ['message', 'error']) {
      const message: unknown = (data as Record<string, unknown>)[key];
      if (typeof message === 'string' && message.length > 0) {
        return message;
      }
    }
  }
  return undefined;
}

/** A failed request in a person's words (`errorWords`), for any note the sidebar shows. */
export function describeError(error: unknown): string {
  if (error instanceof ServerConnection.ResponseError) {
    const own = error.message !== error.response.statusText ? error.message : undefined;
    return errorWords(error.response.status, own);
  }
  if (error instanceof ServerConnection.NetworkError) {
    return errorWords(0);
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Whether a failed request says that this server is not running (stopped, reclaimed): the
 * sidebar then says so once, above its figures, instead of a failure line in every section.
 */
export function serverNotRunning(error: unknown): boolean {
  return describeError(error) === say('error.notRunning');
}
