// The statements behind the Jobs page read the history of finished jobs (which only grows) through
// an index, never by scanning it: checked on a schema whose archive holds 60,000 jobs against 3,000
// live ones (ids up to 600,000), vacuumed as autovacuum would leave it. The 1,000,000-job figures are in the README
// (bench/explain-1m.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '@q/schema';
import { StatementScope, type Statement } from '@q/schema/internal';
import { createTestSchema, type TestSchema } from '@q/testing';
import { JOB_COUNTS } from '../src/sql/job-counts.js';
import { LIST_FINISHED_JOBS, LIST_JOBS, LIST_LIVE_JOBS, listStatement } from '../src/sql/list-jobs.js';
import { THROUGHPUT } from '../src/sql/throughput.js';

let schema: TestSchema;
let scope: StatementScope;

beforeAll(async () => {
  schema = await createTestSchema('dashplan');
  const pool = schema.pool();
  await migrate(pool, { modules: ['jobs'] });
  scope = new StatementScope(schema.name);
  await pool.query(`
    INSERT INTO q_jobs (queue, job_type, status, job_group)
    SELECT 'q' || (g % 3), 't' || (g % 7), (CASE WHEN g % 10 = 0 THEN 'retry_wait' ELSE 'queued' END)::q_job_status, 'g' || (g % 11)
      FROM generate_series(1, 3000) g`);
  await pool.query(`
    INSERT INTO q_jobs_archive (id, queue, job_type, status, finished_at)
    SELECT 10 * g, 'q' || (g % 3), 't' || (g % 7), (CASE WHEN g % 100 = 0 THEN 'dead_letter' ELSE 'succeeded' END)::q_job_status,
           now() - interval '2 days' + g * interval '2 seconds'
      FROM generate_series(1, 60000) g`);
  await pool.query('VACUUM ANALYZE q_jobs');
  await pool.query('VACUUM ANALYZE q_jobs_archive');
}, 120_000);
afterAll(async () => {
  await schema?.drop();
});

async function plan(stmt: Statement, values: unknown[]): Promise<string> {
  const { rows } = await schema.pool().query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN ${scope.bind(stmt).text}`, values });
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

describe('plans of the Jobs page', () => {
  it('chooses the table a status lives in', () => {
    expect(listStatement(null)).toBe(LIST_JOBS);
    expect(listStatement('queued')).toBe(LIST_LIVE_JOBS);
    expect(listStatement('waiting')).toBe(LIST_LIVE_JOBS);
    for (const s of ['succeeded', 'cancelled', 'dead_letter']) expect(listStatement(s)).toBe(LIST_FINISHED_JOBS);
  });

  it.each([
    ['counts', JOB_COUNTS, [10_000]],
    ['throughput', THROUGHPUT, []],
    ['list, no filter', LIST_JOBS, [null, null, null, null, null, 51, null]],
    ['list, a queue', LIST_JOBS, [null, 'q1', null, null, null, 51, null]],
    ['list, dead letter', LIST_FINISHED_JOBS, ['dead_letter', null, null, null, null, 51, null]],
    ['list, queued in a queue', LIST_LIVE_JOBS, ['queued', 'q1', null, null, null, 51, null]],
    ['list, type and group, one search window', LIST_JOBS, [null, null, 't3', 'g5', null, 51, '500000']],
  ] as Array<[string, Statement, unknown[]]>)('%s reads no finished job by a sequential scan', async (_label, stmt, values) => {
    const p = await plan(stmt, values);
    expect(p).not.toMatch(/Seq Scan on q_jobs_archive/);
    expect(p).toMatch(/Index|Bitmap/);
  });

  it('counts the dead letter through its partial index and the last hour through the BRIN index', async () => {
    const p = await plan(JOB_COUNTS, [10_000]);
    expect(p).toContain('q_jobs_archive_status_id_idx');
    expect(p).toContain('q_jobs_archive_finished_at_idx');
  });

  it('can count every live status through an index (at 3,000 live jobs a planner may rightly scan the table instead)', async () => {
    // With sequential scans priced out, a scan of q_jobs still in the plan would mean no index can
    // serve some part of the statement; at 1,000,000 jobs the planner picks the indexes by itself
    // (bench/explain-1m.ts, README).
    const client = await schema.pool().connect();
    try {
      await client.query('SET enable_seqscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN ${scope.bind(JOB_COUNTS).text}`, values: [10_000] });
      const p = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(p).not.toMatch(/Seq Scan on q_jobs\b/);
    } finally {
      await client.query('RESET enable_seqscan');
      client.release();
    }
  });

  it('caps the counts: the queued per queue, another status as a whole', async () => {
    const run = async (cap: number) =>
      (
        await schema
          .pool()
          .query<{ queue: string; status: string; n: string; capped: boolean }>({ text: scope.bind(JOB_COUNTS).text, values: [cap] })
      ).rows;
    // 2,700 queued (900 per queue), 300 retry_wait (100 per queue), 600 dead letters: all exact under a cap of 1,000.
    const exact = await run(1_000);
    expect(exact.filter((r) => r.status === 'queued').map((r) => [r.queue, r.n, r.capped])).toEqual([
      ['q0', '900', false],
      ['q1', '900', false],
      ['q2', '900', false],
    ]);
    expect(exact.filter((r) => r.status === 'dead_letter').reduce((a, r) => a + Number(r.n), 0)).toBe(600);
    expect(exact.some((r) => r.capped)).toBe(false);
    // A cap of 250: each queue's backlog reads 251 rows and is marked; retry_wait (300) is read as 251 rows in all.
    const capped = await run(250);
    expect(capped.filter((r) => r.status === 'queued').map((r) => [r.queue, r.n, r.capped])).toEqual([
      ['q0', '251', true],
      ['q1', '251', true],
      ['q2', '251', true],
    ]);
    const retry = capped.filter((r) => r.status === 'retry_wait');
    expect(retry.every((r) => r.capped)).toBe(true);
    expect(retry.reduce((a, r) => a + Number(r.n), 0)).toBe(251);
    expect(capped.filter((r) => r.status === 'dead_letter').every((r) => r.capped)).toBe(true);
  });
});
