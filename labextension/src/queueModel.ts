/**
 * Pure helpers of the Queue section: checking the payload and putting it into words.
 */
import { durationWords } from './durations';
import { say } from './messages';
import type { IQueue, IQueueItem, IQueueTeam } from './types';

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

/**
 * What the item waits for when Kueue's Topology Aware Scheduling holds it back ("waiting for a
 * whole node": the quota is there, no node has room yet), in the service's words; `null` when
 * it waits for quota (or the service is older and does not say).
 */
export function waitingFor(item: IQueueItem): string | null {
  return typeof item.waiting_for === 'string' && item.waiting_for !== '' ? item.waiting_for : null;
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

/** A GPU resource as its user calls it: `GPU`, `MIG 1g.10gb`, `shared GPU` (else its name). */
function resourceWords(resource: string): string {
  const name = resource.replace('nvidia.com/', '');
  if (name === 'gpu') {
    return say('queue.resourceGpu');
  }
  if (name === 'gpu.shared') {
    return say('queue.resourceShared');
  }
  if (name.startsWith('mig-')) {
    return say('queue.resourceMig', { profile: name.slice('mig-'.length) });
  }
  return name;
}

/**
 * What an item asked for: the offering's name in the catalog, else its GPU resources, never
 * the offering's slug. (GPU-equivalents are for the operators' console, not for the person
 * waiting.)
 */
export function requestLabel(item: IQueueItem): string {
  if (item.offering_display_name) {
    return item.offering_display_name;
  }
  const gpus = Object.entries(item.resources)
    .filter(([name]) => name.startsWith('nvidia.com/'))
    .map(([name, qty]) => say('queue.amount', { amount: qty, resource: resourceWords(name) }));
  return gpus.length > 0 ? gpus.join(', ') : say('queue.noGpu');
}

/** The team an item waits in: its name in the catalog, else `your team` (never the slug). */
export function itemTeamLabel(item: IQueueItem): string {
  return item.team_display_name ?? say('queue.ownTeam');
}

/**
 * The names of the per-team rows, in order: each team's name in the catalog; teams the
 * service cannot name are `Your team`, or `Your team 1`, `Your team 2`… when there are several
 * (never the slug).
 */
export function teamLabels(teams: readonly IQueueTeam[]): string[] {
  const unnamed = teams.filter(t => !t.display_name).length;
  let n = 0;
  return teams.map(t => {
    if (t.display_name) {
      return t.display_name;
    }
    n += 1;
    return unnamed === 1 ? say('queue.teamUnnamed') : say('queue.teamUnnamedNumbered', { n });
  });
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
      formatWaited(i.waited_seconds),
      requestLabel(i),
      itemTeamLabel(i),
      waitingFor(i)
    ]),
    teams: queue.teams.map(t => [t.team, t.display_name, t.admitted, t.pending])
  });
}
