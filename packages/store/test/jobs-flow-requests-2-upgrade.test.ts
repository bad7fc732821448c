// Jobs migration 0018 (inference steps sent when runnable, #41) on a database of the previous
// build: an inference step that build sent with its flow (a link, no kept spec) still finishes
// by its result and releases its child; once failed, retryFlow leaves it and the nodes below it;
// a step with parents works on the upgraded schema.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { dsnWithSchema, migrateAsOlderBuild, testDatabaseUrl, useScratchSchemas } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore, RequestStore } from '../src/index.js';

const naming = { quoteIdent, journalTable: JOURNAL_TABLE };
const scratch = useScratchSchemas(naming);

describe('migration 0018 (jobs) on a database of the previous build', () => {
  it('finishes and leaves alone the inference steps that build sent, and sends new ones when released', async () => {
    const schema = scratch.name('jobflowreq2up');
    const q = quoteIdent(schema);
    await migrateAsOlderBuild(
      scratch.admin,
      schema,
      [...bundledMigrations('requests'), ...bundledMigrations('jobs').filter((m) => m.tag < '0018')],
      naming,
    );
    // Two flows as the previous build inserted them: a sent step (its job, request and link) and a child.
    const old = async (n: number): Promise<string> => {
      const { rows } = await scratch.admin.query<{ id: string }>(`INSERT INTO ${q}.q_flows (name) VALUES ('old${n}') RETURNING id`);
      const flowId = rows[0]!.id;
      const { rows: jobs } = await scratch.admin.query<{ id: string; ref: string }>(
        `INSERT INTO ${q}.q_jobs (queue, job_type, payload, status, max_attempts, flow_id, flow_ref, parents_left) VALUES
           ('llm', 'q:request', jsonb_build_object('request', jsonb_build_object('id', 'r${n}', 'queue', 'llm', 'deadline', 2000000000)), 'waiting', 1, $1, 'ask', NULL),
           ('fq', 'use', '{}', 'waiting', 5, $1, 'use', 1)
         RETURNING id, flow_ref AS ref`,
        [flowId],
      );
      const ask = jobs.find((j) => j.ref === 'ask')!.id;
      const use = jobs.find((j) => j.ref === 'use')!.id;
      await scratch.admin.query(`INSERT INTO ${q}.q_job_edges (parent_id, child_id, on_failure) VALUES ($1, $2, 'fail')`, [ask, use]);
      await scratch.admin.query(
        `INSERT INTO ${q}.q_requests (id, request_token, queue, partition_id, deadline, envelope, payload, created_at)
         VALUES ('r${n}', 't${n}', 'llm', 0, 2000000000, '{}', '\\x31'::bytea, ${n})`,
      );
      await scratch.admin.query(
        `INSERT INTO ${q}.q_flow_requests (job_id, request_id, request_token, deadline) VALUES ($1, 'r${n}', 't${n}', 2000000000)`,
        [ask],
      );
      return flowId;
    };
    const okFlow = await old(1);
    const failFlow = await old(2);

    const requests = await RequestStore.open(dsnWithSchema(testDatabaseUrl(), schema), { maxConns: 2 });
    const jobs = await JobStore.open(dsnWithSchema(testDatabaseUrl(), schema), { maxConns: 2 }); // applies 0018
    try {
      await requests.ensurePartitions('llm');
      await requests.acquirePartitions('llm', 'o', new Date(), 600_000, 64);
      const sent = await requests.dispatch('llm', 'o', new Date(), 10);
      expect(sent.map((x) => x.id).sort()).toEqual(['r1', 'r2']);
      const ack = async (id: string, token: string, message: Record<string, unknown>): Promise<void> => {
        const r = sent.find((x) => x.id === id)!;
        expect(r.token).toBe(token);
        await requests.ack('o', [{ id, token, attempt: r.attempt, route: 'anywhere', payload: JSON.stringify({ id, ...message }) }]);
      };
      await ack('r1', 't1', { status_code: 200, payload: '"fine"' });
      expect((await jobs.flows.get(okFlow))?.nodes).toMatchObject({ ask: { status: 'succeeded', result: 'fine' }, use: { status: 'queued' } });

      await ack('r2', 't2', { payload: '{}', error_code: 'INFERENCE_ERROR' });
      expect((await jobs.flows.get(failFlow))?.nodes).toMatchObject({ ask: { status: 'dead_letter' }, use: { status: 'dead_letter' } });
      // Nothing kept to send: the step and the node below it stay as they are.
      expect(await jobs.flows.retry(failFlow, { mode: 'failed-and-downstream' })).toEqual({ retried: 0 });
      expect((await jobs.flows.get(failFlow))?.nodes).toMatchObject({ ask: { status: 'dead_letter' }, use: { status: 'dead_letter' } });

      // A step with parents on the upgraded schema: sent at its release.
      const { jobs: nodes } = await jobs.flows.insert({
        nodes: [
          { ref: 'prep', type: 'prep', queue: 'fq' },
          { ref: 'ask', request: { queue: 'llm', payload: 'new', deadlineSeconds: 60 }, dependsOn: ['prep'] },
        ],
      });
      const count = async (): Promise<number> =>
        (await scratch.admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q}.q_requests`)).rows[0]!.n;
      const before = await count();
      const claimed = await jobs.claim({ queues: ['fq'], workerId: 'w', limit: 10, leaseMs: 60_000 });
      const prep = claimed.find((j) => j.id === nodes.prep!.id)!;
      await jobs.complete([{ id: prep.id, leaseToken: prep.leaseToken, status: 'succeeded' }]);
      expect(await count()).toBe(before + 1);
    } finally {
      await jobs.close();
      await requests.close();
    }
  });
});
