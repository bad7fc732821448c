// Jobs migration 0015 and requests migration 0005 (inference steps, #41) on a database both of
// whose modules were migrated by the previous build: every job (live, archived, a waiting flow
// node), request and result is carried over unchanged, the old flow still releases its child, and
// an inference step works on the upgraded schema.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { dsnWithSchema, migrateAsOlderBuild, testDatabaseUrl, useScratchSchemas } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore, RequestStore } from '../src/index.js';

const naming = { quoteIdent, journalTable: JOURNAL_TABLE };
const scratch = useScratchSchemas(naming);

describe('migrations 0015 (jobs) and 0005 (requests) on a database of the previous build', () => {
  it('keeps every job, request and result, and an old flow still releases its child', async () => {
    const schema = scratch.name('jobflowrequp');
    const q = quoteIdent(schema);
    await migrateAsOlderBuild(
      scratch.admin,
      schema,
      [...bundledMigrations('requests').filter((m) => m.tag < '0005'), ...bundledMigrations('jobs').filter((m) => m.tag < '0015')],
      naming,
    );
    const dsn = dsnWithSchema(testDatabaseUrl(), schema);
    const before = await JobStore.open(dsn, { maxConns: 2, migrate: false });
    try {
      await before.enqueue([
        { queue: 'f', type: 'live', payload: { n: 1 } },
        { queue: 'f', type: 'done', payload: { n: 2 } },
      ]);
      await before.flows.insert({
        nodes: [
          { ref: 'p', type: 'parent', queue: 'f' },
          { ref: 'c', type: 'child', queue: 'f', dependsOn: ['p'] },
        ],
      });
    } finally {
      await before.close();
    }
    await scratch.admin.query(
      `UPDATE ${q}.q_jobs SET status = 'succeeded', result = '{"ok": true}', finished_at = now() WHERE job_type = 'done'`,
    );
    await scratch.admin.query(
      `INSERT INTO ${q}.q_requests (id, request_token, queue, partition_id, deadline, envelope, payload, created_at)
       VALUES ('r1', 't1', 'llm', 3, 2000000000, '{}', '\\x01'::bytea, 1)`,
    );
    await scratch.admin.query(
      `INSERT INTO ${q}.q_results (route, id, request_token, payload, created_at) VALUES ('out', 'r0', 't0', 'answer', 1)`,
    );
    const snapshot = async (): Promise<unknown[]> =>
      (
        await scratch.admin.query<{ j: unknown }>(
          `SELECT to_jsonb(a) AS j FROM ${q}.q_jobs_all a
           UNION ALL SELECT to_jsonb(r) FROM ${q}.q_requests r
           UNION ALL SELECT to_jsonb(s) FROM ${q}.q_results s
           UNION ALL SELECT to_jsonb(e) FROM ${q}.q_job_edges e
           UNION ALL SELECT to_jsonb(f) FROM ${q}.q_flows f ORDER BY 1`,
        )
      ).rows.map((r) => r.j);
    const was = await snapshot();
    expect(was).toHaveLength(4 + 1 + 1 + 1 + 1);

    const requests = await RequestStore.open(dsn, { maxConns: 2 }); // applies requests 0005: no function yet, no trigger
    const jobs = await JobStore.open(dsn, { maxConns: 2 }); // applies jobs 0015, which adds the trigger
    try {
      expect(await snapshot()).toEqual(was);
      const { rows: trig } = await scratch.admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_trigger WHERE tgname = 'q_flow_request_result' AND tgrelid = '${q}.q_results'::regclass`,
      );
      expect(trig[0]!.n).toBe(1);
      // The old flow releases its child.
      const claimed = await jobs.claim({ queues: ['f'], workerId: 'w', limit: 10, leaseMs: 60_000 });
      expect(claimed.map((j) => j.type).sort()).toEqual(['live', 'parent']);
      const p = claimed.find((j) => j.type === 'parent')!;
      await jobs.complete([{ id: p.id, leaseToken: p.leaseToken, status: 'succeeded', result: 1 }]);
      const { rows } = await scratch.admin.query<{ s: string }>(`SELECT status::text AS s FROM ${q}.q_jobs_all WHERE flow_ref = 'c'`);
      expect(rows[0]!.s).toBe('queued');
      // The request and result of the old build are served as before.
      expect((await requests.popResults('out', 0, 10)).map((r) => r.payload)).toEqual(['answer']);
      // An inference step on the upgraded schema.
      const { flowId } = await jobs.flows.insert({ nodes: [{ ref: 'ask', request: { queue: 'llm2', payload: 'hi', deadline: 2_000_000_000 } }] });
      await requests.ensurePartitions('llm2');
      await requests.acquirePartitions('llm2', 'o', new Date(), 600_000, 64);
      const [req] = await requests.dispatch('llm2', 'o', new Date(), 10);
      await requests.ack('o', [
        {
          id: req!.id,
          token: req!.token,
          attempt: req!.attempt,
          route: `q:flow:${flowId}`,
          payload: JSON.stringify({ id: req!.id, payload: '"yes"' }),
        },
      ]);
      expect((await jobs.flows.get(flowId))?.nodes.ask).toMatchObject({ status: 'succeeded', result: 'yes' });
    } finally {
      await jobs.close();
      await requests.close();
    }
  });
});
