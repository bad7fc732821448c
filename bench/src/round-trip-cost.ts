/**
 * What q's round-trip statement costs the database beyond the writes it has to make. The same
 * drain (`N` no-op jobs, enqueued up front and not timed, then rounds that each write the
 * previous round's outcomes and claim `--batch` more) runs two ways on the same tables:
 *
 * - `q`: `JobStore.completeAndClaim`, the statement a default `Worker` runs (outcomes fenced by
 *   token, lock keys, several queues, retries, the fenced-lease report);
 * - `minimal`: one statement that makes the same writes for this workload and nothing else: the
 *   delete from `q_jobs`, the archive row, and the claim of one queue, its values written in.
 *
 * A third drain, `q-complete`, claims with `JobStore.claim` and writes the outcomes with
 * `JobStore.complete` (the path of a worker without a local queue); it reports the database's
 * and this process's CPU of the `complete` calls alone.
 *
 * Each runs on one connection of its own, whose backend's CPU is read from /proc (so the server
 * must run on this machine), per job. The order of the three drains is rotated each round; medians
 * are reported, with how often the server planned q's statement afresh (`custom_plans` of
 * `pg_prepared_statements`): a custom plan is a planning pass on every execution.
 *
 *   DSN=postgres://… node bench/dist/round-trip-cost.js [--jobs 20000] [--batch 500] [--reps 9]
 *
 * It runs on a fresh schema of its own (dropped at the end); nothing else should run meanwhile.
 */
import pg from 'pg';
import { JobStore, type JobLease, type LeasedJob } from '@q/store';
import { cpuSeconds } from './backend-cpu.js';
import { ARCHIVED_ON_SUCCESS, JOB_COLUMNS } from './job-columns.js';
import { summarize } from './stats.js';
import { toolArgs } from './tool-args.js';

const args = toolArgs();
const dsn = args.dsn;
const JOBS = args.num('jobs', 20_000);
const BATCH = args.num('batch', 500);
const REPS = args.num('reps', 9);
const SCHEMA = `q_round_trip_${process.pid}`;
const QUEUE = 'round-trip';
const ENQUEUE_BATCH = 1_000;
const LEASE_MS = 90_000;
const backendPid = async (db: pg.Pool | pg.Client): Promise<number> =>
  (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? 0;

const T = `"${SCHEMA}"`;
/** The columns q's claim returns besides the id and the lease token (the worker's job fields). */
const RETURNED = JOB_COLUMNS.filter(
  (c) => !['id', 'lease_token', 'status', 'leased_by', 'lease_expires_at', 'heartbeat_at', 'correlation_id'].includes(c),
)
  .map((c) => `j.${c}`)
  .join(', ');
/**
 * `$1` ids, `$2` lease tokens of the outcomes; returns the claimed jobs' ids, tokens and the
 * columns q's claim returns (so both statements format the same output), then a row with the
 * count of outcomes written.
 */
const MINIMAL = `
WITH gone AS (
  DELETE FROM ${T}.q_jobs j USING unnest($1::int8[], $2::uuid[]) AS u(id, token)
  WHERE j.id = ANY($1::int8[]) AND j.id = u.id AND j.lease_token = u.token RETURNING j.*
), archived AS (
  INSERT INTO ${T}.q_jobs_archive (${JOB_COLUMNS.join(', ')})
  SELECT ${ARCHIVED_ON_SUCCESS} FROM gone
), claimed AS (
  UPDATE ${T}.q_jobs j SET status = 'running', leased_by = 'w', lease_token = gen_random_uuid(),
         lease_expires_at = now() + interval '${LEASE_MS} milliseconds', heartbeat_at = now(),
         attempt = j.attempt + 1, updated_at = now()
  FROM (SELECT id FROM ${T}.q_jobs WHERE queue = '${QUEUE}' AND status = 'queued' AND run_at <= now()
        ORDER BY priority DESC NULLS LAST, run_at, id LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) p
  WHERE j.id = p.id
  RETURNING j.id, j.lease_token, ${RETURNED}
)
SELECT claimed.*, NULL::int8 AS written FROM claimed
UNION ALL SELECT ${Array.from({ length: RETURNED.split(',').length + 2 }, () => 'NULL').join(', ')}, count(*) FROM gone`;

interface Drain {
  /** Database CPU per job, µs. */
  micros: number;
  /** This process's CPU per job, µs (measured for `q-complete` only). */
  nodeMicros?: number;
}

/** Drains the table with the store's round trips on its one connection. */
async function drainQ(store: JobStore, pid: number): Promise<Drain> {
  const cpu = cpuSeconds(pid);
  let done = 0;
  let held: LeasedJob[] = [];
  for (;;) {
    const outcomes = held.map((j: JobLease) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const, result: null }));
    const r = await store.completeAndClaim(outcomes, { queues: [QUEUE], workerId: 'w', limit: BATCH, leaseMs: LEASE_MS, start: true });
    const fenced = r.written.filter((w) => !w).length;
    if (fenced > 0) throw new Error(`q: ${fenced} outcomes fenced`);
    done += held.length;
    if (r.jobs.length === 0 && held.length === 0) break;
    held = r.jobs;
  }
  if (done !== JOBS) throw new Error(`q: ${done} of ${JOBS} jobs done`);
  return { micros: ((cpuSeconds(pid) - cpu) / JOBS) * 1e6 };
}

/** Drains the table with separate claims and completions; times the completions alone. */
async function drainQComplete(store: JobStore, pid: number): Promise<Drain> {
  let db = 0;
  let node = 0;
  let done = 0;
  for (;;) {
    const held = await store.claim({ queues: [QUEUE], workerId: 'w', limit: BATCH, leaseMs: LEASE_MS, start: true });
    if (held.length === 0) break;
    const cpu = cpuSeconds(pid);
    const own = process.cpuUsage();
    const written = await store.complete(held.map((j) => ({ id: j.id, leaseToken: j.leaseToken, status: 'succeeded' as const, result: null })));
    const used = process.cpuUsage(own);
    node += used.user + used.system;
    db += cpuSeconds(pid) - cpu;
    done += written.filter(Boolean).length;
  }
  if (done !== JOBS) throw new Error(`q-complete: ${done} of ${JOBS} jobs done`);
  return { micros: (db / JOBS) * 1e6, nodeMicros: node / JOBS };
}

/** Drains the table with the minimal statement on its own connection. */
async function drainMinimal(db: pg.Client, pid: number): Promise<Drain> {
  const cpu = cpuSeconds(pid);
  let done = 0;
  let held: Array<[string, string]> = [];
  for (;;) {
    const { rows } = await db.query<Array<string | null>>({
      name: 'round_trip_minimal',
      text: MINIMAL,
      values: [held.map((h) => h[0]), held.map((h) => h[1])],
      rowMode: 'array',
    });
    const last = (r: Array<string | null>) => r[r.length - 1];
    const written = Number(last(rows.find((r) => last(r) !== null) ?? []) ?? 0);
    if (written !== held.length) throw new Error(`minimal: ${written} of ${held.length} outcomes written`);
    done += written;
    held = rows.filter((r) => last(r) === null).map((r) => [r[0] ?? '', r[1] ?? '']);
    if (held.length === 0 && written === 0) break;
  }
  if (done !== JOBS) throw new Error(`minimal: ${done} of ${JOBS} jobs done`);
  return { micros: ((cpuSeconds(pid) - cpu) / JOBS) * 1e6 };
}

const median = (a: readonly number[]): number => summarize(a).median;

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: dsn, application_name: 'q-round-trip-cost' });
  await admin.connect();
  // One connection each, so each backend's CPU is exactly its statements'.
  const pool = new pg.Pool({ connectionString: dsn, max: 1, application_name: 'q-round-trip-cost' });
  pool.on('error', (err) => process.stderr.write(`round-trip-cost: pool: ${err.message}\n`));
  const minimal = new pg.Client({ connectionString: dsn, application_name: 'q-round-trip-cost' });
  await minimal.connect();
  let store: JobStore | undefined;
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${T} CASCADE`);
    await admin.query(`CREATE SCHEMA ${T}`);
    store = await JobStore.fromPool(pool, { schema: SCHEMA });
    const qPid = await backendPid(pool);
    const minimalPid = await backendPid(minimal);
    const micros = { q: [] as number[], minimal: [] as number[], 'q-complete': [] as number[] };
    const completeNodeMicros: number[] = [];
    const order = ['q', 'minimal', 'q-complete'] as const;
    for (let r = 0; r < REPS; r++) {
      // Rotated, so drift of a shared machine hits every drain alike.
      for (const which of order.map((_, i) => order[(i + r) % order.length] ?? 'q')) {
        await admin.query(`DELETE FROM ${T}.q_jobs`);
        await admin.query(`TRUNCATE ${T}.q_jobs_archive`);
        for (let n = 0; n < JOBS; n += ENQUEUE_BATCH) {
          await store.enqueue(
            Array.from({ length: Math.min(ENQUEUE_BATCH, JOBS - n) }, (_, k) => ({ queue: QUEUE, type: 'noop', payload: { i: n + k } })),
          );
        }
        await admin.query(`VACUUM ANALYZE ${T}.q_jobs`);
        await admin.query(`VACUUM ANALYZE ${T}.q_jobs_archive`);
        const d =
          which === 'q'
            ? await drainQ(store, qPid)
            : which === 'minimal'
              ? await drainMinimal(minimal, minimalPid)
              : await drainQComplete(store, qPid);
        micros[which].push(d.micros);
        if (d.nodeMicros !== undefined) completeNodeMicros.push(d.nodeMicros);
        console.error(`round ${r + 1}/${REPS} ${which}: ${d.micros.toFixed(1)} µs database CPU per job`);
      }
    }
    const plans = await pool.query<{ name: string; generic_plans: string; custom_plans: string }>(
      `SELECT name, generic_plans::text, custom_plans::text FROM pg_prepared_statements WHERE starts_with(name, 'q_jobs_complete_claim')`,
    );
    const q = median(micros.q);
    const min = median(micros.minimal);
    console.log(
      JSON.stringify({
        jobs: JOBS,
        batch: BATCH,
        reps: REPS,
        qMicrosPerJob: Math.round(q * 10) / 10,
        minimalMicrosPerJob: Math.round(min * 10) / 10,
        ratio: Math.round((q / min) * 100) / 100,
        qSamples: micros.q.map((x) => Math.round(x * 10) / 10),
        minimalSamples: micros.minimal.map((x) => Math.round(x * 10) / 10),
        completeMicrosPerJob: Math.round(median(micros['q-complete']) * 10) / 10,
        completeNodeMicrosPerJob: Math.round(median(completeNodeMicros) * 100) / 100,
        qPlans: plans.rows[0] ? { generic: Number(plans.rows[0].generic_plans), custom: Number(plans.rows[0].custom_plans) } : null,
      }),
    );
  } finally {
    await store?.close().catch(() => undefined);
    await admin.query(`DROP SCHEMA IF EXISTS ${T} CASCADE`).catch(() => undefined);
    await Promise.allSettled([admin.end(), minimal.end(), pool.end()]);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
