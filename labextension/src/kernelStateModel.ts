/**
 * A notebook's saved variables, without the DOM (docs/kernel-state.md; the answers of
 * `gpuaas/api/kernel-state*` in docs/api.md): what the server says, and the words of the
 * notices that tell the user what came back, what did not and how long it took.
 */

import { durationWords } from './durations';
import { basename, formatBytes } from './format';
import { say } from './messages';
import type { components } from './extensionApi';
import { isRecord } from './guards';

/** Restoring a notebook's variables when it opens with a new kernel (the plugin setting). */
export type RestoreMode = 'automatic' | 'ask' | 'off';

export const DEFAULT_RESTORE_MODE: RestoreMode = 'automatic';

/** A variable not kept, or not restored, and why. */
export type IKernelStateLost = components['schemas']['kernel_state_lost'];

/** One kernel's snapshot (`POST gpuaas/api/kernel-state/snapshot`, one per kernel). */
export type IKernelStateOutcome = components['schemas']['kernel_state_outcome'];

/** `POST gpuaas/api/kernel-state/snapshot`. */
export type IKernelStateSnapshot = components['schemas']['kernel_state_snapshot'];

/** `GET gpuaas/api/kernel-state?path=...`: the snapshot as its manifest lists it. */
export type IKernelStateInfo = components['schemas']['kernel_state_info'];

/** `POST gpuaas/api/kernel-state/restore`. */
export type IKernelStateRestore = components['schemas']['kernel_state_restore'];

/** `GET gpuaas/api/kernel-state/estimate`: what a reclaim now would keep, and its save time. */
export type IKernelStateEstimate = components['schemas']['kernel_state_estimate'];

/** A notice to show: its words, its kind, and the full lists behind a "Details" button. */
export interface IStateNotice {
  message: string;
  type: 'success' | 'warning' | 'error' | 'info';
  details: string[];
}

const NAMED = 3;

function lostList(value: unknown): IKernelStateLost[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value.filter(isRecord).map(v => ({
    name: String(v.name),
    reason: typeof v.reason === 'string' ? v.reason : ''
  }));
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** The restore answer, or null when the body is not one. */
export function parseRestore(data: unknown): IKernelStateRestore | null {
  const statuses = ['restored', 'none', 'skipped', 'refused', 'unavailable'];
  if (!isRecord(data) || typeof data.status !== 'string' || !statuses.includes(data.status)) {
    return null;
  }
  return {
    path: typeof data.path === 'string' ? data.path : '',
    kernel_id: typeof data.kernel_id === 'string' ? data.kernel_id : '',
    status: data.status as IKernelStateRestore['status'],
    message: typeof data.message === 'string' ? data.message : '',
    restored: strings(data.restored),
    not_restored: lostList(data.not_restored),
    notes: strings(data.notes),
    bytes: typeof data.bytes === 'number' ? data.bytes : 0,
    seconds: typeof data.seconds === 'number' ? data.seconds : 0,
    saved_at: typeof data.saved_at === 'string' ? data.saved_at : null
  };
}

/**
 * The user expression that restores a notebook's variables as it opens, in its own kernel
 * (`jupyter_gpuaas.kernel.restore.restore_as_opened`): sent as a silent execute on the
 * notebook's kernel connection, it runs before any cell sent after it. A JSON
 * string is a Python string literal too.
 */
export function restoreExpression(path: string): string {
  const request = JSON.stringify({ path });
  return (
    "__import__('jupyter_gpuaas.kernel.restore', fromlist=['_'])" +
    `.restore_as_opened(${JSON.stringify(request)})`
  );
}

/**
 * The restore's answer from the execute reply of `restoreExpression`; null where the kernel
 * cannot say (not Python, or without this package: nothing is kept for it).
 */
export function restoreAnswerOf(
  reply: unknown,
  path: string,
  kernelId: string
): IKernelStateRestore | null {
  const unavailable = (message: string): IKernelStateRestore => ({
    path,
    kernel_id: kernelId,
    status: 'unavailable',
    message
  });
  if (!isRecord(reply)) {
    return unavailable('the kernel gave no answer');
  }
  if (reply.status !== 'ok') {
    return unavailable(`the kernel refused the request: ${String(reply.ename)}`);
  }
  const answer = isRecord(reply.user_expressions) ? reply.user_expressions.answer : null;
  if (!isRecord(answer)) {
    return unavailable('the kernel gave no answer');
  }
  if (answer.status !== 'ok') {
    const name = String(answer.ename);
    if (['ModuleNotFoundError', 'ImportError', 'NameError', 'SyntaxError'].includes(name)) {
      return null;
    }
    return unavailable(`the kernel's state code failed (${name}: ${String(answer.evalue)})`);
  }
  const data = isRecord(answer.data) ? answer.data['application/json'] : null;
  return isRecord(data) ? parseRestore({ ...data, path, kernel_id: kernelId }) : null;
}

/** The snapshot info, or null when the body is not one. */
export function parseInfo(data: unknown): IKernelStateInfo | null {
  if (!isRecord(data) || typeof data.exists !== 'boolean') {
    return null;
  }
  return {
    path: typeof data.path === 'string' ? data.path : '',
    exists: data.exists,
    saved_at: typeof data.saved_at === 'string' ? data.saved_at : null,
    bytes: typeof data.bytes === 'number' ? data.bytes : 0,
    variables: strings(data.variables),
    lost: lostList(data.lost),
    problem: typeof data.problem === 'string' ? data.problem : null
  };
}

/** The snapshot answer's outcomes (those that parse). */
export function parseOutcomes(data: unknown): IKernelStateOutcome[] {
  if (!isRecord(data) || !Array.isArray(data.outcomes)) {
    return [];
  }
  return data.outcomes.filter(isRecord).map(o => ({
    kernel_id: String(o.kernel_id),
    notebook: typeof o.notebook === 'string' ? o.notebook : '',
    outcome: (['kept', 'kept_with_losses', 'failed', 'skipped_busy'].includes(String(o.outcome))
      ? o.outcome
      : 'failed') as IKernelStateOutcome['outcome'],
    lost: lostList(o.lost),
    error: typeof o.error === 'string' ? o.error : '',
    bytes: typeof o.bytes === 'number' ? o.bytes : 0,
    seconds: typeof o.seconds === 'number' ? o.seconds : 0,
    saved_at: typeof o.saved_at === 'string' ? o.saved_at : null
  }));
}

function count(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

/** The estimate answer, or null when the body is not one. */
export function parseEstimate(data: unknown): IKernelStateEstimate | null {
  if (!isRecord(data) || typeof data.keeps !== 'boolean') {
    return null;
  }
  const kernels = Array.isArray(data.kernels) ? data.kernels.filter(isRecord) : [];
  return {
    keeps: data.keeps,
    bytes: count(data.bytes) ?? 0,
    seconds: count(data.seconds) ?? 0,
    kernels: kernels.map(k => ({
      kernel_id: String(k.kernel_id),
      path: typeof k.path === 'string' ? k.path : '',
      bytes: count(k.bytes),
      variables: count(k.variables),
      not_kept: lostList(k.not_kept)
    }))
  };
}

/**
 * What a reclaim now would keep, in the sidebar's words: "A reclaim would keep 3.2 GiB of
 * variables (about 9 s to save, within the 1 min 16 s it waits)", or that the save would take
 * longer than the reclaim waits (`waitSeconds`: the standing's `snapshot_wait_seconds`; null:
 * not known), then the variables that never can be kept. Empty where nothing would be kept or
 * nothing is known yet.
 */
export function estimateWords(
  estimate: IKernelStateEstimate | null,
  waitSeconds: number | null
): string {
  if (!estimate?.keeps) {
    return '';
  }
  const known = estimate.kernels.filter(k => k.bytes !== null);
  const variables = known.reduce((n, k) => n + (k.variables ?? 0), 0);
  const notKept = estimate.kernels.flatMap(k => k.not_kept);
  if (known.length === 0 || (variables === 0 && notKept.length === 0)) {
    return '';
  }
  const words = variables === 0 ? say('state.wouldKeepNothing') : keptWords(estimate, waitSeconds);
  return notKept.length > 0
    ? `${words} ${say('state.wouldLose', { lost: lostWords(notKept) })}`
    : words;
}

/** The size and the save time of `estimateWords`, and whether the save fits the wait. */
function keptWords(estimate: IKernelStateEstimate, waitSeconds: number | null): string {
  const values = {
    size: formatBytes(estimate.bytes),
    duration: durationWords(Math.max(1, Math.ceil(estimate.seconds))),
    limit: waitSeconds === null ? '' : durationWords(waitSeconds)
  };
  if (waitSeconds === null) {
    return say('state.wouldKeep', values);
  }
  return say(
    estimate.seconds <= waitSeconds ? 'state.wouldKeepFits' : 'state.wouldKeepTooLong',
    values
  );
}

/**
 * A variable's name in a notification: in quotes, “frame”. JupyterLab shows a notification's
 * message as plain text, so Markdown would show as it is (the hub side's `quoted` in
 * jupyter_gpuaas/core/kernel_state.py; tests/unit/core/kernel_state_words.json holds the cases
 * both follow).
 */
export function quoted(name: string): string {
  return `“${name}”`;
}

/** "“frame”, “array” and 2 more". */
export function namesWords(names: readonly string[], named = NAMED): string {
  const shown = names.slice(0, named).map(quoted);
  if (names.length > named) {
    shown.push(`${String(names.length - named)} more`);
  }
  return shown.length <= 1
    ? (shown[0] ?? '')
    : `${shown.slice(0, -1).join(', ')} and ${shown[shown.length - 1]}`;
}

/**
 * "“batches” (a generator) and 1 more": the first `named` lost variables with their reasons
 * (a notification names one; the rest are behind its "Details"), as the hub side's
 * `lost_words` says them.
 */
export function lostWords(lost: readonly IKernelStateLost[], named = 1): string {
  const shown = lost.slice(0, named).map(v => `${quoted(v.name)} (${v.reason})`);
  if (lost.length > named) {
    shown.push(`${String(lost.length - named)} more`);
  }
  return shown.length <= 1
    ? (shown[0] ?? '')
    : `${shown.slice(0, -1).join(', ')} and ${shown[shown.length - 1]}`;
}

function seconds(value: number): string {
  return value < 10 ? `${value.toFixed(1)} s` : durationWords(Math.round(value));
}

function detailLines(restored: readonly string[], lost: readonly IKernelStateLost[]): string[] {
  const lines = restored.length > 0 ? [say('state.back', { names: restored.join(', ') })] : [];
  for (const v of lost) {
    lines.push(say('state.notBackOne', { name: v.name, reason: v.reason }));
  }
  return lines;
}

/** A restore that could not run: refused (an error) or unavailable (a warning). */
function problemNotice(answer: IKernelStateRestore): IStateNotice {
  const notebook = basename(answer.path);
  return answer.status === 'refused'
    ? {
        message: say('state.refused', { notebook, message: answer.message }),
        type: 'error',
        details: [answer.message]
      }
    : {
        message: say('state.notRestored', { notebook, problem: answer.message }),
        type: 'warning',
        details: [answer.message]
      };
}

/** A restore that ran: what came back, what did not, how long it took; null for nothing. */
function outcomeNotice(answer: IKernelStateRestore): IStateNotice | null {
  const restored = answer.restored ?? [];
  const lost = answer.not_restored ?? [];
  const notes = answer.notes ?? [];
  if (restored.length === 0 && lost.length === 0) {
    return null;
  }
  const notebook = basename(answer.path);
  const details = [...detailLines(restored, lost), ...notes];
  if (restored.length === 0) {
    return {
      message: say('state.nothingBack', { notebook, lost: lostWords(lost) }),
      type: 'warning',
      details
    };
  }
  const names = namesWords(restored);
  const duration = seconds(answer.seconds ?? 0);
  if (lost.length === 0) {
    return {
      message: say('state.restored', { notebook, names, duration }),
      type: notes.length > 0 ? 'warning' : 'success',
      details
    };
  }
  return {
    message: say('state.restoredExcept', { notebook, names, duration, lost: lostWords(lost) }),
    type: 'warning',
    details
  };
}

/**
 * What to tell the user after a restore; null when there is nothing to say (no snapshot,
 * a kernel that had already run cells and was left alone, a snapshot with nothing in it).
 */
export function restoreNotice(answer: IKernelStateRestore): IStateNotice | null {
  switch (answer.status) {
    case 'none':
    case 'skipped':
      return null;
    case 'refused':
    case 'unavailable':
      return problemNotice(answer);
    default:
      return outcomeNotice(answer);
  }
}

/** The question of the "ask" setting, or null when there is nothing to restore. */
export function askMessage(info: IKernelStateInfo, now: Date = new Date()): string | null {
  if (!info.exists || (info.variables.length === 0 && info.problem === null)) {
    return null;
  }
  const saved = info.saved_at === null ? NaN : Date.parse(info.saved_at);
  const ago = Number.isNaN(saved)
    ? say('relative.justNow')
    : say('relative.ago', {
        duration: durationWords(Math.max(0, Math.round((now.getTime() - saved) / 1000)))
      });
  return say('state.ask', {
    notebook: basename(info.path),
    ago,
    names: namesWords(info.variables)
  });
}

/** What to tell the user after "Save variables now". */
export function snapshotNotice(outcome: IKernelStateOutcome): IStateNotice {
  const notebook = basename(outcome.notebook) || say('state.thisKernel');
  const details = detailLines([], outcome.lost);
  const size = formatBytes(outcome.bytes);
  const duration = seconds(outcome.seconds);
  switch (outcome.outcome) {
    case 'kept':
      return {
        message: say('state.saved', { notebook, size, duration }),
        type: 'success',
        details
      };
    case 'kept_with_losses':
      return {
        message: say('state.savedExcept', {
          notebook,
          size,
          duration,
          lost: lostWords(outcome.lost)
        }),
        type: 'warning',
        details
      };
    case 'skipped_busy':
      return { message: say('state.busy', { notebook }), type: 'warning', details };
    default:
      return {
        message: say('state.notSaved', { notebook, problem: outcome.error }),
        type: 'error',
        details: [outcome.error]
      };
  }
}

/** The plugin setting's value, or the default for anything else. */
export function restoreModeOf(value: unknown): RestoreMode {
  return value === 'automatic' || value === 'ask' || value === 'off' ? value : DEFAULT_RESTORE_MODE;
}
