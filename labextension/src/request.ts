import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

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

  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(
      error instanceof TypeError ? error : new TypeError(String(error))
    );
  }

  const text = await response.text();
  let data: unknown = text;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      if (response.ok) {
        throw new ServerConnection.ResponseError(
          response,
          `${endpoint}: the server's answer is not JSON`
        );
      }
    }
  }

  if (!response.ok && !accept.includes(response.status)) {
    throw new ServerConnection.ResponseError(response, errorMessage(data));
  }
  return { status: response.status, data };
}

/** The HTTP status of a failed request: 0 when nothing answered, -1 for other errors. */
export function failureStatus(error: unknown): number {
  if (error instanceof ServerConnection.ResponseError) {
    return error.response.status;
  }
  return error instanceof ServerConnection.NetworkError ? 0 : -1;
}

/** The message of a Jupyter Server error body (`{"message": ...}`), or the body itself. */
function errorMessage(data: unknown): string | undefined {
  if (typeof data === 'object' && data !== null && 'message' in data) {
    const message = data.message;
    if (typeof message === 'string' && message.length > 0) {
      return message;
    }
  }
  return typeof data === 'string' && data.length > 0 ? data : undefined;
}
