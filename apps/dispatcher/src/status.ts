// `q-dispatcher status`: per queue, the backlog, what expires soon, partitions by owner (epochs,
// draining) and the results waiting on its route.
import type { OwnerPartitions, RequestStore } from '@q/store';

/** Deadline-proximity windows shown by `status`, seconds. */
export const EXPIRING_WINDOWS = [60, 300, 3600];

/** One queue's state. */
export interface QueueStatus {
  queue: string;
  route: string;
  /** Pending requests (cancelled ones not counted). */
  backlog: number;
  /** Cancelled requests a dispatcher has not answered yet (pending or in flight). */
  cancelled: number;
  /** Pending requests whose deadline is within each of {@link EXPIRING_WINDOWS}. */
  expiring: Record<string, number>;
  owners: OwnerPartitions[];
  resultsWaiting: number;
}

/** Reads the status of the given queues. */
export async function queueStatus(store: RequestStore, queues: Array<{ queue: string; route: string }>): Promise<QueueStatus[]> {
  const now = Math.floor(Date.now() / 1000);
  return Promise.all(
    queues.map(async ({ queue, route }) => {
      const [b, owners, resultsWaiting] = await Promise.all([
        store.backlog(queue, now, EXPIRING_WINDOWS),
        store.partitionOwners(queue),
        store.resultDepth(route),
      ]);
      const expiring: Record<string, number> = {};
      EXPIRING_WINDOWS.forEach((w, i) => (expiring[`${w}s`] = b.expiring[i] ?? 0));
      return { queue, route, backlog: b.depth, cancelled: b.cancelled, expiring, owners, resultsWaiting };
    }),
  );
}

/** Human-readable status. */
export function formatStatus(all: QueueStatus[]): string {
  const out: string[] = [];
  for (const s of all) {
    out.push(`queue ${s.queue}`);
    out.push(`  backlog            ${s.backlog} pending`);
    out.push(`  cancelled          ${s.cancelled} (not answered by a dispatcher yet)`);
    out.push(
      `  expiring within    ${Object.entries(s.expiring)
        .map(([w, n]) => `${w}: ${n}`)
        .join(', ')}`,
    );
    out.push(`  results waiting    ${s.resultsWaiting} on route ${s.route}`);
    if (s.owners.length === 0) out.push('  partitions         none yet (no dispatcher has started on this queue)');
    for (const o of s.owners) {
      const who = o.owner === '' ? '(unowned)' : `${o.owner}${o.live ? '' : ' (lease lapsed)'}`;
      const epochs = o.minEpoch === o.maxEpoch ? `epoch ${o.minEpoch}` : `epochs ${o.minEpoch}–${o.maxEpoch}`;
      out.push(`  partitions         ${String(o.partitions).padStart(2)} × ${who}, ${epochs}, ${o.draining} draining`);
    }
  }
  return out.join('\n');
}
