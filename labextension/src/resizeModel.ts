/**
 * The way up to a bigger GPU, without the DOM (docs/api.md, `gpuaas/api/resize`): what the
 * service offers, the words of the action and its confirmation, where the browser goes while
 * the server moves, and which kernels at their cap are told about it.
 */

import { say } from './messages';
import type { components } from './extensionApi';
import { isRecord } from './guards';

/** An offering as `gpuaas/api/resize` describes it. */
export type IResizeOffering = components['schemas']['service_resize_offering'];

/** The way down: a smaller offering, offered as this session's peak stayed far below its share. */
export type IResizeDown = components['schemas']['service_resize_down'];

/** `GET gpuaas/api/resize`: what runs, the next size up (or null) and why not, the way down. */
export type IResizeOffer = components['schemas']['service_resize_offer'];

/** `POST gpuaas/api/resize` answered 202: the move under way and the options it starts with. */
export type IResizeMove = components['schemas']['service_resize_move'];

function parseOffering(value: unknown): IResizeOffering | null {
  if (!isRecord(value) || typeof value.slug !== 'string' || typeof value.title !== 'string') {
    return null;
  }
  const offering: IResizeOffering = {
    slug: value.slug,
    title: value.title,
    count: typeof value.count === 'number' ? value.count : 1,
    memory: typeof value.memory === 'number' ? value.memory : null,
    memory_text: typeof value.memory_text === 'string' ? value.memory_text : null
  };
  const room = value.headroom;
  if (isRecord(room) && typeof room.fit === 'string' && typeof room.message === 'string') {
    offering.headroom = { fit: room.fit, message: room.message };
  }
  return offering;
}

/** The service's answer, or null when it is not one (an error, a server that is not set up). */
export function parseOffer(data: unknown): IResizeOffer | null {
  if (!isRecord(data)) {
    return null;
  }
  const current = parseOffering(data.current);
  if (current === null) {
    return null;
  }
  return {
    current,
    next: data.next === null ? null : parseOffering(data.next),
    reason: typeof data.reason === 'string' ? data.reason : '',
    down: parseDown(data.down)
  };
}

/** An offering whose memory is known, in bytes and in words (a way down needs both). */
function hasMemory(
  offering: IResizeOffering | null
): offering is IResizeOffering & { memory: number; memory_text: string } {
  if (offering === null) {
    return false;
  }
  return offering.memory !== null && offering.memory_text !== null;
}

function parseDown(value: unknown): IResizeDown | null {
  const offering = parseOffering(value);
  if (!isRecord(value) || typeof value.peak !== 'number' || !hasMemory(offering)) {
    return null;
  }
  return {
    slug: offering.slug,
    title: offering.title,
    count: offering.count,
    memory: offering.memory,
    memory_text: offering.memory_text,
    peak: value.peak,
    peak_text: typeof value.peak_text === 'string' ? value.peak_text : ''
  };
}

/** The way down's line: `This session uses 3 GiB of its 20 GiB: move to 5 GiB?`. */
export function downOffer(offer: IResizeOffer & { down: IResizeDown }): string {
  return say('resize.downOffer', {
    peak: offer.down.peak_text,
    current: offer.current.memory_text ?? offer.current.title,
    next: sized(offer.down)
  });
}

/** The way down's button: `Move to a smaller GPU: Quarter of an L4`. */
export function downLabel(down: IResizeDown): string {
  return say('resize.downAction', { next: down.title });
}

/** What the way down's confirmation says: why, then what happens, as for the way up. */
export function downConfirmText(offer: IResizeOffer & { down: IResizeDown }): string {
  const why = say('resize.downWhy', { peak: offer.down.peak_text, next: sized(offer.down) });
  return why + confirmText({ ...offer, next: offer.down });
}

/** The action's label: `Move to a bigger GPU: Half of an L4`. */
export function actionLabel(next: IResizeOffering): string {
  return say('resize.action', { next: next.title });
}

function sized(offering: IResizeOffering): string {
  return offering.memory_text === null
    ? offering.title
    : say('resize.sized', { title: offering.title, memory: offering.memory_text });
}

/** What the confirmation says will happen, in the order it happens. */
export function confirmText(offer: IResizeOffer & { next: IResizeOffering }): string {
  const room = offer.next.headroom;
  const wait =
    room === undefined || room.fit === 'now' || room.fit === 'borrow'
      ? ''
      : say('resize.wait', { why: room.message });
  return say('resize.text', { next: sized(offer.next), current: sized(offer.current), wait });
}

/**
 * The hub's page for a server that is stopping or starting (it shows the stop, the queue
 * position and the start, and opens the server when it is up), or null outside JupyterHub.
 */
export function spawnPendingUrl(
  hubHost: string,
  hubPrefix: string,
  user: string,
  server: string
): string | null {
  if (hubPrefix === '' || user === '') {
    return null;
  }
  const base = hubPrefix.endsWith('/') ? hubPrefix : `${hubPrefix}/`;
  const tail = server === '' ? '' : `/${encodeURIComponent(server)}`;
  return `${hubHost}${base}spawn-pending/${encodeURIComponent(user)}${tail}`;
}

/** A kernel at its cap, as the panel's warnings name it. */
export interface IKernelAtCap {
  /** The kernel's id. */
  kernel: string;
  /** Its notebook's name (or the kernel's, without one). */
  who: string;
  /** The cap in words (`6 GiB`). */
  cap: string;
}

/**
 * What a kernel at its cap is told: the cap, what it means, and the way up where there is one.
 * It says only what the panel saw (its GPU memory at the cap), not that an allocation failed.
 */
export function capMessage(at: IKernelAtCap, next: IResizeOffering | null): string {
  const then = next === null ? say('cap.noWayUp') : say('cap.wayUp', { action: actionLabel(next) });
  return say('cap.reached', { who: at.who, cap: at.cap, then });
}

/**
 * The kernels to tell now: those at their cap not told before. `told` keeps the ones told,
 * and forgets those no longer at their cap, so a kernel that comes back to it is told again.
 */
export function newlyAtCap(told: Set<string>, atCap: readonly IKernelAtCap[]): IKernelAtCap[] {
  const now = new Set(atCap.map(k => k.kernel));
  for (const kernel of told) {
    if (!now.has(kernel)) {
      told.delete(kernel);
    }
  }
  const fresh = atCap.filter(k => !told.has(k.kernel));
  for (const k of fresh) {
    told.add(k.kernel);
  }
  return fresh;
}
