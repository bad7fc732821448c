// The plans and timings in the README's "Every page reads through an index": fills a scratch
// schema with 1,000,000 live and 1,000,000 archived jobs, runs EXPLAIN (ANALYZE, BUFFERS) of each
// statement behind the Jobs page, prints each plan's execution time, and drops the schema.
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test pnpm exec tsx packages/dashboard/bench/explain-1m.ts
import pg from 'pg';
import { migrate } from '@q/schema';
import { StatementScope, type Statement } from '@q/schema/internal';
import { JOB_COUNTS } from '../src/sql/job-counts.js';
import { listStatement } from '../src/sql/list-jobs.js';
import { THROUGHPUT } from '../src/sql/throughput.js';

const dsn = process.env.DATABASE_URL;
if (!dsn) throw new Error('set DATABASE_URL');
const SCHEMA = `q_dash_explain_${process.pid}`;
const pool = new pg.Pool({ connectionString: dsn, max: 2 });
const verbose = process.argv.includes('--plans');

try {
  await migrate(pool, { modules: ['jobs'], schema: SCHEMA });
  const t = (name: string) => `"${SCHEMA}".${name}`;
  const started = Date.now();
  // Live: 900k queued over five queues, 50k running, 30k scheduled, 20k retry_wait.
  await pool.query(`
    INSERT INTO ${t('q_jobs')} (queue, job_type, payload, status, run_at, job_group, leased_by, lease_expires_at, attempt)
    SELECT 'queue-' || (g % 5), 'type-' || (g % 20), '{"n":1}'::jsonb,
           (CASE WHEN g <= 900000 THEN 'queued' WHEN g <= 950000 THEN 'running' WHEN g <= 980000 THEN 'scheduled' ELSE 'retry_wait' END)::${t('q_job_status')},
           CASE WHEN g > 950000 THEN now() + interval '1 hour' ELSE now() - interval '1 day' END,
           'tenant-' || (g % 100),
           CASE WHEN g > 900000 AND g <= 950000 THEN 'worker-1' END,
           CASE WHEN g > 900000 AND g <= 950000 THEN now() + interval '1 minute' END,
           CASE WHEN g > 900000 THEN 1 ELSE 0 END
      FROM generate_series(1, 1000000) g`);
  // Archive: 950k succeeded finished over the last day in id order (as the archive grows), 30k dead letter, 20k cancelled.
  await pool.query(`
    INSERT INTO ${t('q_jobs_archive')} (id, queue, job_type, payload, status, run_at, finished_at, attempt, created_at, updated_at)
    SELECT 2000000 + g, 'queue-' || (g % 5), 'type-' || (g % 20), '{"n":1}'::jsonb,
           (CASE WHEN g % 50 = 0 THEN 'dead_letter' WHEN g % 50 = 1 THEN 'cancelled' ELSE 'succeeded' END)::${t('q_job_status')},
           now() - interval '1 day', now() - interval '1 day' + (g * interval '86 milliseconds'), 1, now() - interval '1 day', now()
      FROM generate_series(1, 1000000) g`);
  // VACUUM as autovacuum would have: it sets the visibility map (index-only scans) and summarizes
  // the BRIN ranges of finished_at (an unsummarized range matches every query).
  await pool.query(`VACUUM ANALYZE ${t('q_jobs')}`);
  await pool.query(`VACUUM ANALYZE ${t('q_jobs_archive')}`);
  process.stdout.write(`filled in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);

  const scope = new StatementScope(SCHEMA);
  const cases: Array<[string, Statement, unknown[]]> = [
    ['overview: counts by queue and status, each up to 10,000', JOB_COUNTS, [10_000]],
    ['overview: finished per minute, last hour', THROUGHPUT, []],
    ['list: newest 51, no filter', listStatement(null), [null, null, null, null, null, 51, null]],
    ['list: queue-3, queued', listStatement('queued'), ['queued', 'queue-3', null, null, null, 51, null]],
    ['list: dead_letter', listStatement('dead_letter'), ['dead_letter', null, null, null, null, 51, null]],
    ['list: type-7, group tenant-7, page 2', listStatement(null), [null, null, 'type-7', 'tenant-7', '1500000', 51, '1400000']],
  ];
  const client = await pool.connect();
  try {
    for (const [label, stmt, values] of cases) {
      const { text } = scope.bind(stmt);
      // Warm once, then measure (a dashboard runs the same statements every few seconds).
      await client.query({ text, values });
      const { rows } = await client.query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN (ANALYZE, BUFFERS) ${text}`, values });
      const plan = rows.map((r) => r['QUERY PLAN']);
      const exec = plan.find((l) => l.startsWith('Execution Time'));
      process.stdout.write(`${label}: ${exec}\n`);
      if (verbose) process.stdout.write(`${plan.join('\n')}\n\n`);
    }
  } finally {
    client.release();
  }
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
  await pool.end();
}
