import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ServerConnection } from '@jupyterlab/services';

import { failureStatus, requestAPI, requestAPIAnswer, serverNotRunning } from '../src/request';

/** Settings whose fetch answers `status` with `body`, or fails as an unreachable server. */
function answering(status: number | 'down', body = ''): ServerConnection.ISettings {
  const fetch = (input: RequestInfo | URL): Promise<Response> => {
    if (status === 'down') {
      return Promise.reject(new TypeError('Failed to fetch'));
    }
    assert.match(String(input instanceof Request ? input.url : input), /\/gpuaas\/api\/usage/);
    return Promise.resolve(new Response(body, { status }));
  };
  return ServerConnection.makeSettings({ baseUrl: 'http://127.0.0.1:1/', fetch });
}

async function failure(settings: ServerConnection.ISettings, accept: number[] = []) {
  try {
    await requestAPIAnswer('usage', {}, settings, accept);
  } catch (error) {
    return error as Error;
  }
  assert.fail('the request did not fail');
}

describe('requestAPIAnswer', () => {
  test('a JSON answer is its data, an empty one its empty text', async () => {
    assert.deepEqual(await requestAPIAnswer('usage', {}, answering(200, '{"a": 1}')), {
      status: 200,
      data: { a: 1 }
    });
    assert.deepEqual(await requestAPIAnswer('usage', {}, answering(200)), {
      status: 200,
      data: ''
    });
    assert.deepEqual(await requestAPI('usage', {}, answering(200, '[1]')), [1]);
  });

  test('a server out of reach is a NetworkError', async () => {
    const error = await failure(answering('down'));
    assert.ok(error instanceof ServerConnection.NetworkError);
    assert.equal(failureStatus(error), 0);
  });

  test('a success that is not JSON is a ResponseError saying so', async () => {
    const error = await failure(answering(200, '<html>'));
    assert.ok(error instanceof ServerConnection.ResponseError);
    assert.equal(error.message, "usage: the server's answer is not JSON");
  });

  test("an error status is a ResponseError with the body's message", async () => {
    const error = await failure(answering(503, '{"error": "the service is away"}'));
    assert.ok(error instanceof ServerConnection.ResponseError);
    assert.equal(error.message, 'the service is away');
    assert.equal(failureStatus(error), 503);
    const page = await failure(answering(502, '<html>bad gateway</html>'));
    assert.ok(page instanceof ServerConnection.ResponseError);
    assert.equal(failureStatus(page), 502);
  });

  test('an accepted error status is returned with its body, JSON or text', async () => {
    assert.deepEqual(
      await requestAPIAnswer('usage', {}, answering(409, '{"why": "none left"}'), [409]),
      { status: 409, data: { why: 'none left' } }
    );
    assert.deepEqual(await requestAPIAnswer('usage', {}, answering(409, 'no'), [409]), {
      status: 409,
      data: 'no'
    });
  });

  test('a stopped server is told apart from a service that is away', async () => {
    // JupyterHub's answer for a stopped server, and its proxy's page with none behind it
    assert.ok(serverNotRunning(await failure(answering(424, '<html>not running</html>'))));
    assert.ok(serverNotRunning(await failure(answering(502, '<html>bad gateway</html>'))));
    // the server answers, in its own words: it runs
    assert.ok(!serverNotRunning(await failure(answering(503, '{"error": "the service is away"}'))));
    assert.ok(!serverNotRunning(await failure(answering('down'))));
  });
});
