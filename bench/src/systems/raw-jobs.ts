import type pg from 'pg';
import { benchPool } from '../pg.js';
import { QUEUE, type JobHarness, type JobSystem, type NoopPayload, type WorkerStart } from './jobs.js';

/**
 * The raw-SQL limit: the simplest durable claim-then-complete loop a perfect library could
 * reduce to. Each of `concurrency` loops claims up to 100 jobs with `FOR UPDATE SKIP LOCKED`,
 * runs them, and deletes them with one `DELETE … = ANY`; idle loops wake on LISTEN/NOTIFY.
 */
const SCHEMA = `
CREATE TABLE raw_jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue text NOT NULL,
  payload jsonb NOT NULL,
  run_at timestamptz NOT NULL DEFAULT now(),
  locked_at timestamptz
);
CREATE INDEX raw_jobs_ready ON raw_jobs (queue, run_at, id) WHERE locked_at IS NULL;
`;

const CLAIM_LIMIT = 100;

const enqueueOne = {
  name: 'raw_jobs_enqueue_one',
  text: `WITH ins AS (INSERT INTO raw_jobs (queue, payload) VALUES ($1, $2) RETURNING id)
         SELECT pg_notify('raw_jobs', '') FROM ins`,
};
const enqueueMany = {
  name: 'raw_jobs_enqueue_many',
  text: `WITH ins AS (INSERT INTO raw_jobs (queue, payload) SELECT $1, p FROM unnest($2::jsonb[]) AS p RETURNING id)
         SELECT pg_notify('raw_jobs', '') FROM (SELECT 1 FROM ins LIMIT 1) AS one`,
};
const claim = {
  name: 'raw_jobs_claim',
  text: `UPDATE raw_jobs AS j SET locked_at = now()
         FROM (SELECT id FROM raw_jobs
               WHERE queue = $1 AND locked_at IS NULL AND run_at <= now()
               ORDER BY run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) AS c
         WHERE j.id = c.id
         RETURNING j.id, j.payload`,
};
const complete = { name: 'raw_jobs_complete', text: 'DELETE FROM raw_jobs WHERE id = ANY($1::bigint[])' };

export const rawSqlJobs: JobSystem = {
  name: 'raw-sql',
  async open(dsn, poolSize): Promise<JobHarness> {
    const pool = benchPool(dsn, poolSize, 'raw-sql jobs');
    try {
      await pool.query(SCHEMA);
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    let enqueued = 0;
    let stopping = false;
    let listener: pg.PoolClient | undefined;
    let loops: Array<Promise<void>> = [];
    let wake: Array<() => void> = [];
    const wakeAll = () => {
      const w = wake;
      wake = [];
      for (const f of w) f();
    };
    const idle = () =>
      new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 500);
        wake.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    const remaining = async () => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM raw_jobs')).rows[0]?.n ?? 0);

    const loop = async (opts: WorkerStart) => {
      while (!stopping) {
        const r = await pool.query<{ id: string; payload: NoopPayload }>({ ...claim, values: [QUEUE, CLAIM_LIMIT] });
        if (r.rows.length === 0) {
          await idle();
          continue;
        }
        for (const row of r.rows) opts.handle(row.payload);
        await pool.query({ ...complete, values: [r.rows.map((x) => x.id)] });
      }
    };

    // The raw loop has neither groups nor handlers that do work: refuse what it would ignore.
    const plainOnly = (what: unknown, name: string): void => {
      if (what !== undefined) throw new Error(`raw-sql jobs: no ${name}`);
    };
    return {
      async enqueueOne(i, group) {
        plainOnly(group, 'job groups');
        await pool.query({ ...enqueueOne, values: [QUEUE, { i } satisfies NoopPayload] });
        enqueued++;
      },
      async enqueueBatch(from, n, group) {
        plainOnly(group, 'job groups');
        const payloads = Array.from({ length: n }, (_, k) => JSON.stringify({ i: from + k } satisfies NoopPayload));
        await pool.query({ ...enqueueMany, values: [QUEUE, payloads] });
        enqueued += n;
      },
      waiting: remaining,
      completed: async () => enqueued - (await remaining()),
      async startWorkers(opts) {
        plainOnly(opts.groupConcurrency, 'job groups');
        plainOnly(opts.work, 'handler work');
        listener = await pool.connect();
        // A checked-out client is no longer covered by the pool's 'error' listener.
        listener.on('error', (err) => process.stderr.write(`bench: raw-sql jobs listener: ${err.message}\n`));
        listener.on('notification', wakeAll);
        await listener.query('LISTEN raw_jobs');
        loops = Array.from({ length: opts.concurrency }, () => loop(opts));
      },
      async close() {
        stopping = true;
        wakeAll();
        try {
          await Promise.all(loops);
        } finally {
          listener?.release();
          await pool.end();
        }
      },
    };
  },
};
