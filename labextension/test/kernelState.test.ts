import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import {
  askMessage,
  estimateWords,
  parseEstimate,
  type IKernelStateInfo,
  type IKernelStateOutcome,
  type IKernelStateRestore,
  type IStateNotice,
  lostWords,
  namesWords,
  parseInfo,
  parseOutcomes,
  parseRestore,
  restoreAnswerOf,
  restoreExpression,
  restoreModeOf,
  restoreNotice,
  snapshotNotice
} from '../src/kernelStateModel';

const RESTORED = {
  path: 'work/train.ipynb',
  kernel_id: 'k1',
  status: 'restored',
  message: '',
  restored: ['frame', 'array', 'np'],
  not_restored: [{ name: 'batches', reason: 'a generator' }],
  notes: [],
  bytes: 2048,
  seconds: 1.2,
  saved_at: '2026-12-06T14:02:00.000Z'
};

function restoreAnswer(data: unknown): IKernelStateRestore {
  const answer = parseRestore(data);
  assert.ok(answer !== null);
  return answer;
}

function noticeOf(data: unknown): IStateNotice {
  const notice = restoreNotice(restoreAnswer(data));
  assert.ok(notice !== null);
  return notice;
}

function infoOf(data: unknown): IKernelStateInfo {
  const info = parseInfo(data);
  assert.ok(info !== null);
  return info;
}

describe('restoreNotice', () => {
  test('says what came back, what did not and how long it took', () => {
    const notice = noticeOf(RESTORED);
    assert.deepEqual(notice, {
      message:
        'train.ipynb: its variables are back (“frame”, “array” and “np”), in 1.2 s, except ' +
        '“batches” (a generator).',
      type: 'warning',
      details: ['Back: frame, array, np', 'Not back: batches (a generator)']
    });
  });

  test('all back is a success', () => {
    const notice = noticeOf({ ...RESTORED, not_restored: [] });
    assert.equal(notice.type, 'success');
    assert.equal(
      notice.message,
      'train.ipynb: its variables are back (“frame”, “array” and “np”), in 1.2 s.'
    );
  });

  test('a refused snapshot says why and that the kernel is unharmed', () => {
    const message = 'the snapshot was written by user id 1001, not by you (1000)';
    const notice = noticeOf({ ...RESTORED, status: 'refused', message });
    assert.equal(notice.type, 'error');
    assert.match(notice.message, /this kernel is as it was: the snapshot was written by/);
  });

  test('nothing to say: no snapshot, a kernel that ran cells, an empty snapshot', () => {
    assert.equal(restoreNotice(restoreAnswer({ ...RESTORED, status: 'none' })), null);
    assert.equal(restoreNotice(restoreAnswer({ ...RESTORED, status: 'skipped' })), null);
    const empty = { ...RESTORED, restored: [], not_restored: [] };
    assert.equal(restoreNotice(restoreAnswer(empty)), null);
  });

  test('an unavailable restore, nothing back, and a long restore', () => {
    const problem = 'the snapshot is unreadable';
    assert.deepEqual(noticeOf({ ...RESTORED, status: 'unavailable', message: problem }), {
      message:
        'train.ipynb: the saved variables could not be restored (the snapshot is unreadable).',
      type: 'warning',
      details: [problem]
    });
    assert.deepEqual(noticeOf({ ...RESTORED, restored: [] }), {
      message: 'train.ipynb: no saved variable came back: “batches” (a generator).',
      type: 'warning',
      details: ['Not back: batches (a generator)']
    });
    const long = noticeOf({ ...RESTORED, not_restored: [], seconds: 75, notes: undefined });
    assert.deepEqual(long, {
      message: 'train.ipynb: its variables are back (“frame”, “array” and “np”), in 1 min.',
      type: 'success',
      details: ['Back: frame, array, np']
    });
  });

  test('a GPU tensor put on the CPU is noted', () => {
    const note = '“w” was on cuda:0; no cuda device here: it is on the CPU';
    const notice = noticeOf({ ...RESTORED, not_restored: [], notes: [note] });
    assert.equal(notice.type, 'warning');
    assert.ok(notice.details.includes(note));
  });
});

describe('parsing', () => {
  test('bodies that are not answers are null or empty', () => {
    assert.equal(parseRestore({ status: 'bogus' }), null);
    assert.equal(parseRestore('text'), null);
    assert.equal(parseInfo({}), null);
    assert.deepEqual(parseOutcomes({ outcomes: 'x' }), []);
  });

  test('the setting falls back to automatic', () => {
    assert.equal(restoreModeOf('ask'), 'ask');
    assert.equal(restoreModeOf('off'), 'off');
    assert.equal(restoreModeOf(undefined), 'automatic');
    assert.equal(restoreModeOf('sometimes'), 'automatic');
  });
});

describe('askMessage', () => {
  const info = {
    path: 'train.ipynb',
    exists: true,
    saved_at: '2026-12-06T14:02:00.000Z',
    bytes: 10,
    variables: ['frame', 'array', 'np', 'model', 'x'],
    lost: [],
    problem: null
  };
  test('names the variables and when they were saved', () => {
    assert.equal(
      askMessage(infoOf(info), new Date('2026-12-06T14:14:00Z')),
      'train.ipynb has variables saved 12 min ago (“frame”, “array”, “np” and 2 more). ' +
        'Restore them into this kernel?'
    );
  });
  test('asks nothing without a snapshot', () => {
    assert.equal(askMessage(infoOf({ ...info, exists: false })), null);
  });
});

describe('snapshotNotice', () => {
  const outcome: IKernelStateOutcome = {
    kernel_id: 'k1',
    notebook: 'train.ipynb',
    outcome: 'kept_with_losses',
    lost: [{ name: 'batches', reason: 'a generator' }],
    error: '',
    bytes: 3 * 2 ** 20,
    seconds: 0.4,
    saved_at: '2026-12-06T14:02:00.000Z'
  };
  test('names what was not saved', () => {
    const notice = snapshotNotice(outcome);
    assert.equal(notice.type, 'warning');
    assert.match(
      notice.message,
      /^Variables of train.ipynb saved \(3(\.0)? MiB, in 0.4 s\), except “batches” \(a generator\)\.$/
    );
  });
  test('a busy kernel and a failure say so', () => {
    assert.match(
      snapshotNotice({ ...outcome, outcome: 'skipped_busy' }).message,
      /a cell is running/
    );
    const failed = snapshotNotice({
      ...outcome,
      outcome: 'failed',
      error: 'not enough free space'
    });
    assert.equal(failed.type, 'error');
    assert.match(failed.message, /not saved: not enough free space/);
  });
});

/** The cases of the rule for names in plain text, which the hub side's Python follows too. */
const WORDS = JSON.parse(
  readFileSync(join(process.cwd(), 'tests', 'unit', 'core', 'kernel_state_words.json'), 'utf-8')
) as {
  lost: { lost: { name: string; reason: string }[]; named: number; words: string }[];
  names: { names: string[]; named: number; words: string }[];
};

describe('names in a notification: quoted, never Markdown', () => {
  for (const c of WORDS.lost) {
    test(`lostWords: ${String(c.lost.length)} lost, ${String(c.named)} named`, () => {
      assert.equal(lostWords(c.lost, c.named), c.words);
    });
  }
  for (const c of WORDS.names) {
    test(`namesWords: ${String(c.names.length)} names`, () => {
      assert.equal(namesWords(c.names, c.named), c.words);
    });
  }

  test('no backtick in any notice', () => {
    const notice = restoreNotice({
      path: 'g.ipynb',
      kernel_id: 'k',
      status: 'restored',
      message: '',
      restored: ['a', 'd'],
      not_restored: [{ name: 'g', reason: 'a generator' }]
    });
    assert.ok(notice);
    assert.equal(
      notice.message,
      'g.ipynb: its variables are back (“a” and “d”), in 0.0 s, except “g” (a generator).'
    );
    assert.doesNotMatch(notice.message, /`/);
  });
});

describe('what a reclaim would keep, before it comes', () => {
  const GiB = 1024 ** 3;
  const estimate = (
    kernels: unknown[],
    bytes = 3.2 * GiB,
    seconds = 9.1
  ): ReturnType<typeof parseEstimate> => parseEstimate({ keeps: true, bytes, seconds, kernels });
  const train = {
    kernel_id: 'k1',
    path: 'train.ipynb',
    bytes: 3.2 * GiB,
    variables: 4,
    not_kept: []
  };

  test('the size and the save time, and whether the save fits the wait', () => {
    assert.equal(
      estimateWords(estimate([train]), null),
      'A reclaim would keep 3.2 GiB of variables (about 10 s to save).'
    );
    assert.equal(
      estimateWords(estimate([train]), 76),
      'A reclaim would keep 3.2 GiB of variables (about 10 s to save, within the 1 min it ' +
        'waits for them).'
    );
    assert.match(
      estimateWords(estimate([train], 40 * GiB, 103), 60),
      /^A reclaim would keep 40 GiB of variables, but saving them takes about 1 min, longer than the 1 min it waits for them: the largest would be lost\./
    );
  });

  test('the variables that are never kept are named', () => {
    const gen = { ...train, not_kept: [{ name: 'batches', reason: 'a generator' }] };
    assert.match(estimateWords(estimate([gen]), null), / Never kept: “batches” \(a generator\)\.$/);
    const only = { ...gen, bytes: 0, variables: 0 };
    assert.equal(
      estimateWords(estimate([only], 0, 0.5), null),
      'A reclaim would keep none of your variables. Never kept: “batches” (a generator).'
    );
  });

  test('nothing is said before a kernel answered, with nothing to keep, or when not kept', () => {
    assert.equal(estimateWords(estimate([{ ...train, bytes: null, variables: null }]), 60), '');
    assert.equal(estimateWords(estimate([{ ...train, bytes: 0, variables: 0 }], 0, 0.5), 60), '');
    assert.equal(estimateWords(estimate([]), 60), '');
    assert.equal(
      estimateWords(parseEstimate({ keeps: false, bytes: 0, seconds: 0, kernels: [] }), 60),
      ''
    );
    assert.equal(parseEstimate({ bytes: 3 }), null);
    assert.equal(estimateWords(null, 60), '');
  });
});

describe('the restore as a notebook opens, in its own kernel', () => {
  test('the expression calls the kernel side with the path as JSON, quotes and all', () => {
    assert.equal(
      restoreExpression('dir/it\'s "x".ipynb'),
      "__import__('jupyter_gpuaas.kernel.restore', fromlist=['_']).restore_as_opened(" +
        '"{\\"path\\":\\"dir/it\'s \\\\\\"x\\\\\\".ipynb\\"}")'
    );
  });

  const reply = (answer: unknown, status = 'ok'): unknown => ({
    status,
    execution_count: 1,
    user_expressions: { answer }
  });

  test("the kernel's JSON answer, with the notebook and the kernel", () => {
    const answer = restoreAnswerOf(
      reply({
        status: 'ok',
        data: {
          'text/plain': '{...}',
          'application/json': { status: 'restored', message: '', restored: ['a'], seconds: 0.2 }
        }
      }),
      'n.ipynb',
      'k1'
    );
    assert.ok(answer);
    assert.equal(answer.path, 'n.ipynb');
    assert.equal(answer.kernel_id, 'k1');
    assert.deepEqual(answer.restored, ['a']);
    assert.equal(
      restoreNotice(answer)?.message,
      'n.ipynb: its variables are back (“a”), in 0.2 s.'
    );
  });

  test('a kernel without the package, or not Python, says nothing', () => {
    for (const ename of ['ModuleNotFoundError', 'SyntaxError', 'NameError']) {
      assert.equal(restoreAnswerOf(reply({ status: 'error', ename, evalue: 'x' }), 'n', 'k'), null);
    }
  });

  test('a failure of the state code or a refused request is said', () => {
    const failed = restoreAnswerOf(
      reply({ status: 'error', ename: 'OSError', evalue: 'disk' }),
      'n.ipynb',
      'k'
    );
    assert.ok(failed);
    assert.equal(failed.status, 'unavailable');
    assert.match(failed.message, /OSError: disk/);
    const refused = restoreAnswerOf({ status: 'error', ename: 'KeyboardInterrupt' }, 'n', 'k');
    assert.equal(refused?.status, 'unavailable');
    assert.equal(restoreAnswerOf(null, 'n', 'k')?.status, 'unavailable');
  });
});
