/**
 * Pure helpers of the Queue section: checking the payload and putting it into words.
 */
import { durationWords } from './durations';
import { say } from './messages';
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
    return say('queue.waitedUnknown');
  }
  return durationWords(seconds);
}

/**
 * The position of an item: `#2 in the team's queue · #5 in the cluster queue`, or why it has
 * none. (The queues' own names are for operators: the person waiting is told which is which.)
 */
export function positionLabel(item: IQueueItem): string {
  if (item.position_in_local_queue === null) {
    return say(item.positions_known ? 'queue.notPlaced' : 'queue.positionLoading');
  }
  const position = item.position_in_local_queue;
  const shared = item.position_in_cluster_queue;
  // A LocalQueue alone in its ClusterQueue (or named as it, at the same place): one position.
  if (shared === null || item.cluster_queue === null || shared === position) {
    return say('queue.position', { position });
  }
  return say('queue.positionShared', { position, shared });
}

/**
 * What an item asked for: the offering, else its GPU resources. (GPU-equivalents are for the
 * operators' console, not for the person waiting.)
 */
export function requestLabel(item: IQueueItem): string {
  const gpus = Object.entries(item.resources)
    .filter(([name]) => name.startsWith('nvidia.com/'))
    .map(([name, qty]) =>
      say('queue.amount', { amount: qty, resource: name.replace('nvidia.com/', '') })
    );
  const what = item.offering ?? (gpus.length > 0 ? gpus.join(', ') : say('queue.noGpu'));
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
