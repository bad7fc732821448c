// What a batch enqueue costs per row. A lookup left inside a per-row expression multiplies with
// the batch: pg_get_serial_sequence written as a one-row FROM item was pulled up into nextval's
// argument and ran a catalog scan for every job, a third of a 1,000-job batch's time. The buffer
// counts of the node that produces the rows show it: one page per row (the sequence's own, as
// each nextval reads it) is the floor, a catalog lookup per row adds three or four.
import { useJobStore } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore } from '../src/index.js';
import { ENQUEUE_CHUNK } from '../src/jobs/index.js';
import { plansOf, walk, type PlanNode } from './requests/plans.js';

let store: JobStore;

useJobStore(
  JobStore,
  { prefix: 'enqplans', maxConns: 1, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] },
  (t) => ({ store } = t),
);

/**
 * Pages read by the function scans `which` picks: the rows' source, with the per-row
 * expressions computed on it (the InitPlans under it are nodes of their own).
 */
function functionScanPages(plans: PlanNode[], which: (n: PlanNode) => boolean): { pages: number; rows: number } {
  let pages = 0;
  let rows = 0;
  for (const plan of plans)
    walk(plan, (n) => {
      if (n['Node Type'] !== 'Function Scan' || !which(n)) return;
      const own = (x: PlanNode) => (x['Shared Hit Blocks'] ?? 0) + (x['Shared Read Blocks'] ?? 0);
      pages += own(n) - (n.Plans ?? []).reduce((sum, child) => sum + own(child), 0);
      rows += n['Actual Rows'] ?? 0;
    });
  return { pages, rows };
}

const jobs = (n: number) => Array.from({ length: n }, (_, i) => ({ queue: 'plans', type: 'noop', payload: { i } }));

describe('batch enqueue per-row cost', () => {
  it('a keyless batch of 1,000 reads about one page per job where its rows are made (the unnest of its input)', async () => {
    await store.enqueue(jobs(10));
    const plans = await plansOf(store.pool, () => store.enqueue(jobs(1_000)), { buffers: true });
    const got = functionScanPages(plans, (n) => n.Alias === 'i');
    expect(got.rows).toBe(1_000);
    expect(got.pages, `${got.pages} pages for ${got.rows} rows`).toBeLessThanOrEqual(1.5 * got.rows);
  });

  it('a batch split over statements draws its ids with one sequence lookup', async () => {
    const n = ENQUEUE_CHUNK + 500;
    const plans = await plansOf(store.pool, () => store.enqueue(jobs(n)), { buffers: true });
    const got = functionScanPages(plans, (n) => n['Function Name'] === 'generate_series');
    expect(got.rows).toBe(n);
    expect(got.pages, `${got.pages} pages for ${got.rows} ids`).toBeLessThanOrEqual(1.5 * got.rows);
  });
});
