import assert from 'node:assert/strict';
import { test } from 'node:test';

import { errorWords } from '../src/errorWords';
import { say } from '../src/messages';

test('a failed request is said in words, never with its HTTP code', () => {
  assert.equal(errorWords(0), say('error.unreachable'));
  assert.equal(
    errorWords(424, 'The server at /user/carol/ is not running'),
    say('error.notRunning')
  );
  // the hub's proxy with nothing behind it: an error page, no message
  assert.equal(errorWords(502), say('error.notRunning'));
  assert.equal(
    errorWords(503, 'Invalid response: 503 Service Unavailable'),
    say('error.notRunning')
  );
  assert.equal(errorWords(403), say('error.refused'));
  assert.equal(errorWords(500, 'HTTP 500: Internal Server Error'), say('error.serverError'));
  assert.equal(errorWords(404), say('error.other'));
  for (const status of [0, 403, 404, 424, 500, 502, 503]) {
    assert.doesNotMatch(errorWords(status), /\d{3}|HTTP/);
  }
});

test("the server extension's words for a gpuaas service problem are shown as they are", () => {
  const words = 'The GPU service is not answering. Try again in a minute.';
  assert.equal(errorWords(502, words), words);
  assert.equal(errorWords(409, 'no snooze is left'), 'no snooze is left');
});
