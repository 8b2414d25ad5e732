import { say } from './messages';

/**
 * A failed request in a person's words, for the sidebar's notes: the server's own message
 * where it gave one (the server extension words the gpuaas service's problems), else what the
 * status means. Never an HTTP code.
 *
 * @param status - the answer's HTTP status; 0 when nothing answered
 * @param message - the message of the answer's JSON body, if it had one
 */
export function errorWords(status: number, message?: string): string {
  if (status === 0) {
    return say('error.unreachable');
  }
  if (status === 424) {
    return say('error.notRunning'); // JupyterHub's answer for a stopped server
  }
  if (message && !/\bHTTP\b|^Invalid response: \d+/.test(message)) {
    return message;
  }
  if (status === 502 || status === 503) {
    return say('error.notRunning'); // the hub's proxy, with no server behind it
  }
  if (status === 401 || status === 403) {
    return say('error.refused');
  }
  return status >= 500 ? say('error.serverError') : say('error.other');
}
