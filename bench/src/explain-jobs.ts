/**
 * Reads the job queue's hot paths on a database: WAL bytes per job for enqueue, claim and
 * complete (the `pg_current_wal_lsn()` difference over a batch, divided by its jobs), and the
 * `EXPLAIN (ANALYZE, BUFFERS, WAL)` of one claim and one complete of 100 jobs, optionally with
 * `--retained N` finished jobs kept in the table (inserted by one set-based statement).
 *
 *   DSN=postgres://… npx tsx bench/src/explain-jobs.ts [--retained 1000000] [--jobs 5000]
 *
 * It runs on a fresh schema of its own (dropped at the end); no other session should write.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { JobStore, type LeasedJob } from '@q/store';
import { toolArgs } from './tool-args.js';

const args = toolArgs();
const arg = args.num;
const dsn = args.dsn;
const JOBS = arg('jobs', 5_000);
const RETAINED = arg('retained', 0);
const BATCH = 100;

async function main(): Promise<void> {
  const schema = `explain_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: dsn, max: 1 });
  const store = await JobStore.open(dsn, { schema, maxConns: 2 });
  const captured = new Map<string, pg.QueryConfig>();
  // Records the first config of each statement the store sends, to EXPLAIN it afterwards.
  const original = store.pool.query.bind(store.pool) as (c: pg.QueryConfig) => Promise<pg.QueryResult>;
  (store.pool as unknown as { query: (c: pg.QueryConfig) => Promise<pg.QueryResult> }).query = (c: pg.QueryConfig) => {
    const name = typeof c === 'object' && c.name ? c.name.replace(/_[0-9a-f]{8}$/, '') : undefined;
    if (name && !captured.has(name)) captured.set(name, c);
    return original(c);
  };
  const lsn = async (): Promise<bigint> =>
    BigInt((await admin.query<{ b: string }>(`SELECT (pg_current_wal_lsn() - '0/0')::text AS b`)).rows[0]?.b ?? '0');
  const perJob = (a: bigint, b: bigint, n: number): number => Math.round(Number(b - a) / n);
  try {
    if (RETAINED > 0) {
      await admin.query(
        `INSERT INTO "${schema}".q_jobs_archive (id, queue, job_type, payload, status, attempt, result, finished_at)
         SELECT nextval((SELECT pg_get_serial_sequence('"${schema}".q_jobs', 'id')::regclass)), 'bench', 'noop', jsonb_build_object('i', g),
                'succeeded', 1, 'null', now() FROM generate_series(1, $1::int) g`,
        [RETAINED],
      );
      await admin.query(`VACUUM ANALYZE "${schema}".q_jobs_archive`);
    }
    let t = await lsn();
    for (let from = 0; from < JOBS; from += 1_000) {
      await store.enqueue(
        Array.from({ length: Math.min(1_000, JOBS - from) }, (_, k) => ({ queue: 'bench', type: 'noop', payload: { i: from + k } })),
      );
    }
    const enqueueWal = perJob(t, await lsn(), JOBS);
    await admin.query(`ANALYZE "${schema}".q_jobs`);
    let claimWal = 0n;
    let completeWal = 0n;
    for (let done = 0; done < JOBS; done += BATCH) {
      t = await lsn();
      const jobs: LeasedJob[] = await store.claim({ queues: ['bench'], workerId: 'explain', limit: BATCH, leaseMs: 60_000, start: true });
      const t2 = await lsn();
      claimWal += t2 - t;
      await store.complete(jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const, result: null })));
      completeWal += (await lsn()) - t2;
    }
    const stats = (
      await admin.query(`SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'q_jobs'`, [schema])
    ).rows[0];
    console.log(
      JSON.stringify({
        jobs: JOBS,
        retained: RETAINED,
        walBytesPerJob: { enqueue: enqueueWal, claim: Number(claimWal) / JOBS, complete: Number(completeWal) / JOBS },
        stats,
      }),
    );

    // One more batch, EXPLAINed (in a transaction rolled back, so nothing changes).
    await store.enqueue(Array.from({ length: BATCH }, (_, k) => ({ queue: 'bench', type: 'noop', payload: { i: k } })));
    const c = await admin.connect();
    try {
      for (const name of ['q_jobs_claim', 'q_jobs_complete']) {
        const cfg = captured.get(name);
        if (!cfg) continue;
        await c.query('BEGIN');
        let values = cfg.values ?? [];
        if (name === 'q_jobs_complete') {
          // Complete the leases of a fresh claim of this batch.
          const claimCfg = captured.get('q_jobs_claim');
          if (!claimCfg) throw new Error('the claim statement was not captured');
          const { rows } = await c.query<{ id: string; lease_token: string }>({ text: claimCfg.text, values: claimCfg.values ?? [] });
          values = [
            rows.map((r) => r.id),
            rows.map((r) => r.lease_token),
            rows.map(() => 'succeeded'),
            rows.map(() => 'null'),
            rows.map(() => null),
            rows.map(() => null),
            rows.map(() => null),
          ];
        }
        const plan = await c.query<{ 'QUERY PLAN': string }>({
          text: `EXPLAIN (ANALYZE, BUFFERS, WAL, COSTS OFF, TIMING OFF) ${cfg.text}`,
          values,
        });
        console.log(
          `\n-- ${name} (${BATCH} jobs${RETAINED ? `, ${RETAINED} retained` : ''})\n${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}`,
        );
        await c.query('ROLLBACK');
      }
    } finally {
      c.release();
    }
  } finally {
    await store.close();
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
    await admin.end();
  }
}

await main();
