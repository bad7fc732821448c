// Migration 0014 (flows, #41) on a database migrated through 0013: every job, live or archived,
// is carried over unchanged (the new columns NULL), a lease taken before the upgrade still
// completes, and the flow tables and trigger work on the upgraded schema.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { useScratchSchemas } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore } from '../src/index.js';

const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });
const TOKEN = '44444444-4444-4444-8444-444444444444';

describe('migration 0014 (flows) on a database through 0013', () => {
  it('keeps every job as it was, and completes a lease taken before the upgrade', async () => {
    const db = await scratch.olderBuild('jobflowsup', bundledMigrations('jobs'), '0014');
    const q = db.quoted;
    // Written by SQL: this build's store reads the flow columns, which the schema lacks before 0014.
    const { rows: inserted } = await scratch.admin.query<{ uuid: string }>(
      `INSERT INTO ${q}.q_jobs (queue, job_type, payload, idempotency_key)
       VALUES ('f', 'queued', '{"n": 1}', 'k1'), ('f', 'running', '{"n": 2}', NULL), ('f', 'done', '{"n": 3}', NULL), ('f', 'dead', '{"n": 4}', NULL)
       RETURNING uuid::text`,
    );
    const uuids = inserted.map((r) => r.uuid);
    // As the previous build's worker and completions left them.
    await scratch.admin.query(
      `UPDATE ${q}.q_jobs SET status = 'running', leased_by = 'old', lease_token = '${TOKEN}', attempt = 1,
              lease_expires_at = now() + interval '1 minute' WHERE job_type = 'running'`,
    );
    await scratch.admin.query(
      `UPDATE ${q}.q_jobs SET status = 'succeeded', result = '{"ok": true}', finished_at = now() WHERE job_type = 'done'`,
    );
    await scratch.admin.query(
      `UPDATE ${q}.q_jobs SET status = 'dead_letter', last_error = 'gave up', finished_at = now(), dead_lettered_at = now() WHERE job_type = 'dead'`,
    );
    const snapshot = async (): Promise<Record<string, unknown>[]> =>
      (
        await scratch.admin.query<{ j: Record<string, unknown> }>(
          `SELECT to_jsonb(a) - 'flow_id' - 'flow_ref' - 'parents_left' AS j FROM ${q}.q_jobs_all a ORDER BY id`,
        )
      ).rows.map((r) => r.j);
    const counts = async () =>
      (
        await scratch.admin.query<{ live: number; archived: number }>(
          `SELECT (SELECT count(*)::int FROM ${q}.q_jobs) AS live, (SELECT count(*)::int FROM ${q}.q_jobs_archive) AS archived`,
        )
      ).rows[0];
    const was = await snapshot();
    expect(await counts()).toEqual({ live: 2, archived: 2 });

    const upgraded = await JobStore.open(db.dsn, { maxConns: 2 }); // applies 0014
    try {
      expect(await snapshot()).toEqual(was);
      expect(await counts()).toEqual({ live: 2, archived: 2 });
      const { rows } = await scratch.admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${q}.q_jobs_all WHERE flow_id IS NOT NULL OR flow_ref IS NOT NULL OR parents_left IS NOT NULL`,
      );
      expect(rows[0]!.n).toBe(0);
      for (const uuid of uuids) expect((await upgraded.get(uuid))?.uuid).toBe(uuid);
      expect((await upgraded.get(uuids[2]!))?.result).toEqual({ ok: true });
      expect((await upgraded.get(uuids[3]!))?.status).toBe('dead_letter');

      // The lease taken before the upgrade still completes, through the archive's new columns.
      const running = await upgraded.get(uuids[1]!);
      expect(await upgraded.complete([{ id: running!.id, leaseToken: TOKEN, status: 'succeeded', result: 7 }])).toEqual([true]);
      expect(await upgraded.get(uuids[1]!)).toMatchObject({ status: 'succeeded', result: 7 });
      // The queued job is claimed as before.
      const claimed = await upgraded.claim({ queues: ['f'], workerId: 'w', limit: 5, leaseMs: 30_000 });
      expect(claimed.map((j) => j.uuid)).toEqual([uuids[0]]);
    } finally {
      await upgraded.close();
    }
  });

  it('releases a waiting child in the statement that completes its parent, on the upgraded schema', async () => {
    const db = await scratch.olderBuild('jobflowsup2', bundledMigrations('jobs'), '0014');
    const q = db.quoted;
    const store = await JobStore.open(db.dsn, { maxConns: 2 }); // applies 0014
    try {
      const { rows } = await scratch.admin.query<{ id: string }>(`INSERT INTO ${q}.q_flows (name) VALUES ('up') RETURNING id`);
      const flowId = rows[0]!.id;
      await scratch.admin.query(
        `INSERT INTO ${q}.q_jobs (queue, job_type, status, flow_id, flow_ref, parents_left)
         VALUES ('f', 'parent', 'queued', $1, 'a', NULL), ('f', 'child', 'waiting', $1, 'b', 1)`,
        [flowId],
      );
      await scratch.admin.query(
        `INSERT INTO ${q}.q_job_edges (parent_id, child_id)
         SELECT p.id, c.id FROM ${q}.q_jobs p, ${q}.q_jobs c WHERE p.flow_ref = 'a' AND c.flow_ref = 'b'`,
      );
      const [parent, ...rest] = await store.claim({ queues: ['f'], workerId: 'w', limit: 5, leaseMs: 30_000 });
      expect(rest).toEqual([]);
      expect(parent!.type).toBe('parent');
      await store.complete([{ id: parent!.id, leaseToken: parent!.leaseToken, status: 'succeeded', result: 1 }]);
      const [child] = await store.claim({ queues: ['f'], workerId: 'w', limit: 5, leaseMs: 30_000 });
      expect(child).toMatchObject({ type: 'child' });
    } finally {
      await store.close();
    }
  });
});
