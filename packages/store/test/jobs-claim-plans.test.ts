// How the worker's statements are planned. A prepared statement gets a plan for its values on
// each of its first five executions; after that PostgreSQL keeps one plan for any values only if
// it looks no more expensive. The claim's values (a one-queue array, a small LIMIT) made its
// value-specific plans look cheaper, so it was planned again on every execution: about half of
// an idle worker's claim round trip, and 1.5 ms of each complete-and-claim round. These tests
// hold the statements to one plan per connection, and that plan to index lookups on a backlog.
import { useJobStore } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore, type JobOutcome, type LeasedJob } from '../src/index.js';
import { plansOf, walk, type PlanNode } from './requests/plans.js';

let store: JobStore;

useJobStore(
  JobStore,
  { prefix: 'claimplans', maxConns: 1, truncate: ['q_jobs', 'q_jobs_archive', 'q_jobs_idempotency_keys'] },
  (t) => ({ store } = t),
);

const jobs = (n: number, queue = 'plans') => Array.from({ length: n }, (_, i) => ({ queue, type: 'noop', payload: { i } }));
const claimOpts = (limit: number) => ({ queues: ['plans'], workerId: 'w', limit, leaseMs: 60_000, start: true });
const succeeded = (leased: readonly LeasedJob[]): JobOutcome[] =>
  leased.map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded', result: null }));

/** Plans made so far on the store's only connection, per statement (by name without its schema suffix). */
async function planCounts(): Promise<Map<string, { generic: number; custom: number }>> {
  const { rows } = await store.pool.query<{ name: string; generic_plans: string; custom_plans: string }>(
    'SELECT name, generic_plans, custom_plans FROM pg_prepared_statements',
  );
  return new Map(rows.map((r) => [r.name.replace(/_[0-9a-f]{8}$/, ''), { generic: Number(r.generic_plans), custom: Number(r.custom_plans) }]));
}

/** Every scan of a job table in `plans`, as `node on relation (index)`. */
function scans(plans: PlanNode[]): string[] {
  const out: string[] = [];
  for (const plan of plans)
    walk(plan, (n) => {
      if (n['Node Type'].endsWith('Scan') && n['Relation Name']?.startsWith('q_jobs'))
        out.push(`${n['Node Type']} on ${n['Relation Name']} (${n['Index Name'] ?? '-'})`);
    });
  return out;
}

describe('worker statement plans', () => {
  it('the claim, the complete and the complete-and-claim are planned once per connection, whatever their values', async () => {
    // A backlog the planner knows of: with statistics, a plan for LIMIT 1 on one queue looks
    // far cheaper than one for any LIMIT on any queues.
    await store.enqueue(jobs(300));
    await store.pool.query('ANALYZE q_jobs');
    for (let round = 1; round <= 8; round++) {
      const leased = await store.claim(claimOpts(round % 3 === 0 ? 4 : 1));
      expect(leased.length).toBeGreaterThan(0);
      const { jobs: next } = await store.completeAndClaim(succeeded(leased), claimOpts(round));
      expect(next.length).toBe(round);
      expect(await store.complete(succeeded(next))).toEqual(next.map(() => true));
    }
    const counts = await planCounts();
    for (const name of ['q_jobs_claim', 'q_jobs_complete_claim', 'q_jobs_complete']) {
      const c = counts.get(name);
      expect(c, `${name}: ${JSON.stringify([...counts])}`).toEqual({ custom: 5, generic: 3 });
    }
  });

  it('on a backlog of 20,000 jobs the generic plans read the job table through its indexes', async () => {
    await store.enqueue(jobs(20_000));
    await store.enqueue(jobs(2_000, 'other'));
    await store.pool.query('ANALYZE q_jobs');
    // Five executions with their own plans, then the plan for any values.
    for (let i = 0; i < 5; i++) await store.complete(succeeded(await store.completeAndClaim([], claimOpts(1)).then((r) => r.jobs)));
    for (let i = 0; i < 5; i++) await store.complete(succeeded(await store.claim(claimOpts(1))));
    let claimed: LeasedJob[] = [];
    const claimPlans = await plansOf(store.pool, async () => {
      claimed = await store.claim(claimOpts(500));
    });
    expect(claimed).toHaveLength(500);
    let next: LeasedJob[] = [];
    const roundPlans = await plansOf(store.pool, async () => {
      next = (await store.completeAndClaim(succeeded(claimed), claimOpts(500))).jobs;
    });
    expect(next).toHaveLength(500);
    const counts = await planCounts();
    expect(counts.get('q_jobs_claim')?.generic).toBeGreaterThanOrEqual(1);
    expect(counts.get('q_jobs_complete_claim')?.generic).toBeGreaterThanOrEqual(1);
    // Through an index, plain or bitmap: a sequential scan of the table (the plan a join of the
    // picked jobs could get under generic estimates) is what must not happen.
    for (const found of [scans(claimPlans), scans(roundPlans)]) {
      expect(found.length, found.join('\n')).toBeGreaterThan(0);
      expect(
        found.filter((s) => s.startsWith('Seq Scan')),
        found.join('\n'),
      ).toEqual([]);
    }
    expect(scans(claimPlans)).toContain('Index Scan on q_jobs (q_jobs_dequeue_idx)');
    expect(scans(roundPlans)).toContain('Index Scan on q_jobs (q_jobs_pkey)');
  });
});
