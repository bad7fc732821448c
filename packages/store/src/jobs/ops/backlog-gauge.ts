// The `q.jobs.backlog` gauge: registered by the store at open, collected on the exporter's
// schedule. Kept apart from the store facade because a collection must never fail the exporter.
import type { MeterProvider } from '@opentelemetry/api';
import { observeGauge } from '@q/otel';
import { countBacklog } from '../sql/count-backlog.js';
import type { JobStoreContext } from './context.js';

/** Name of the jobs backlog gauge (`{job}` count per `queue` and `status`). */
export const JOBS_BACKLOG_METRIC = 'q.jobs.backlog';

/**
 * Observes the backlog of the store behind `ctx` (nothing once `closed()`); returns the function
 * that stops observing it.
 */
export function observeBacklog(meterProvider: MeterProvider | undefined, ctx: JobStoreContext, closed: () => boolean): () => void {
  return observeGauge(
    meterProvider,
    JOBS_BACKLOG_METRIC,
    { unit: '{job}', description: 'Jobs per queue and status (scheduled, queued, leased, running, retry_wait, dead_letter)' },
    async () => {
      if (closed()) return [];
      try {
        return (await countBacklog(ctx.scope, ctx.pool)).map((r) => ({ value: r.count, attributes: { queue: r.queue, status: r.status } }));
      } catch {
        // A collection must not fail the exporter: this one reports nothing.
        return [];
      }
    },
  );
}
