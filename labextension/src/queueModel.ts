/**
 * Pure helpers of the Queue section: checking the payload and putting it into words.
 */
import { durationWords } from './durations';
import type { IQueue, IQueueItem } from './types';

/** Check the shape of a `queue` payload (throws on anything that is not one). */
export function parseQueue(data: unknown): IQueue {
  if (typeof data !== 'object' || data === null) {
    throw new Error('the queue answer is not an object');
  }
  const queue = data as Partial<IQueue>;
  if (!Array.isArray(queue.items) || !Array.isArray(queue.teams)) {
    throw new Error('the queue answer has no items or teams');
  }
  return {
    user: queue.user ?? null,
    generated_at: queue.generated_at ?? '',
    synced: queue.synced ?? false,
    items: queue.items,
    teams: queue.teams,
    error: queue.error ?? null,
    error_kind: queue.error_kind ?? null
  };
}

/** A waiting time in words (`45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`), or `unknown`. */
export function formatWaited(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) {
    return 'unknown';
  }
  return durationWords(seconds);
}

/** The position of an item: `#2 in training · #5 in team-a-training`, or why it has none. */
export function positionLabel(item: IQueueItem): string {
  if (item.position_in_local_queue === null) {
    return item.positions_known ? 'not placed in the queue yet' : 'position loading…';
  }
  const local = `#${String(item.position_in_local_queue)} in ${item.local_queue}`;
  if (item.position_in_cluster_queue === null || item.cluster_queue === null) {
    return local;
  }
  const shared = `#${String(item.position_in_cluster_queue)}`;
  if (item.cluster_queue !== item.local_queue) {
    return `${local} · ${shared} in ${item.cluster_queue}`;
  }
  // A LocalQueue named as its ClusterQueue: say a position once, or which queue is which.
  return item.position_in_cluster_queue === item.position_in_local_queue
    ? local
    : `${local} · ${shared} in ClusterQueue ${item.cluster_queue}`;
}

/**
 * What an item asked for: the offering, else its GPU resources. (GPU-equivalents are for the
 * operators' console, not for the person waiting.)
 */
export function requestLabel(item: IQueueItem): string {
  const gpus = Object.entries(item.resources)
    .filter(([name]) => name.startsWith('nvidia.com/'))
    .map(([name, qty]) => `${qty}× ${name.replace('nvidia.com/', '')}`);
  const what = item.offering ?? (gpus.length > 0 ? gpus.join(', ') : 'no GPU');
  return what;
}

/** A stable signature of what the section shows (the waiting time in minutes only). */
export function queueSignature(queue: IQueue | null, error: string | null): string {
  if (queue === null) {
    return JSON.stringify({ error });
  }
  return JSON.stringify({
    error,
    e: queue.error,
    items: queue.items.map(i => [
      i.workload,
      i.position_in_local_queue,
      i.position_in_cluster_queue,
      formatWaited(i.waited_seconds)
    ]),
    teams: queue.teams.map(t => [t.team, t.admitted, t.pending])
  });
}
