// Migration 0015 (flow release per statement, #41) on a database migrated through 0014: every job,
// live or archived, and every edge is carried over unchanged, and a flow begun under 0014's row
// trigger finishes under the statement trigger: its waiting join released once, by the count left.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { useScratchSchemas } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { JobStore } from '../src/index.js';

const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });
const LEASE = 60_000;

describe('migration 0015 (flow release per statement) on a database through 0014', () => {
  it('keeps every job and edge as it was, and finishes a flow begun before the upgrade', async () => {
    const db = await scratch.olderBuild('jobflowrel', bundledMigrations('jobs'), '0015');
    const q = db.quoted;
    const claim = (s: JobStore, queue: string) => s.claim({ queues: [queue], workerId: 'w', limit: 10, leaseMs: LEASE, start: true });
    const before = await JobStore.open(db.dsn, { maxConns: 2, migrate: false });
    try {
      await before.enqueue([{ queue: 'plain', type: 'p', payload: { n: 1 } }]);
      await before.flows.insert({
        name: 'up',
        nodes: [
          { ref: 'a', type: 'part', queue: 'rp' },
          { ref: 'b', type: 'part', queue: 'rp' },
          { ref: 'c', type: 'part', queue: 'rp' },
          { ref: 'join', type: 'join', queue: 'rj', dependsOn: ['a', 'b', 'c'] },
        ],
      });
      // Under 0014: one parent finished, by its row trigger.
      const [a] = await claim(before, 'rp');
      await before.complete([{ id: a!.id, leaseToken: a!.leaseToken, status: 'succeeded', result: 'a' }]);
    } finally {
      await before.close();
    }
    const snapshot = async (): Promise<unknown[]> =>
      (
        await scratch.admin.query<{ j: unknown }>(
          `SELECT to_jsonb(a) AS j FROM ${q}.q_jobs_all a
           UNION ALL SELECT to_jsonb(e) FROM ${q}.q_job_edges e
           UNION ALL SELECT to_jsonb(f) FROM ${q}.q_flows f ORDER BY 1`,
        )
      ).rows.map((r) => r.j);
    const was = await snapshot();
    expect(was).toHaveLength(5 + 3 + 1);

    const upgraded = await JobStore.open(db.dsn, { maxConns: 2 }); // applies 0015
    try {
      expect(await snapshot()).toEqual(was);
      const { rows: trig } = await scratch.admin.query<{ level: string }>(
        `SELECT action_orientation AS level FROM information_schema.triggers
         WHERE event_object_schema = $1 AND trigger_name = 'q_jobs_flow_finished'`,
        [db.schema],
      );
      expect(trig).toEqual([{ level: 'STATEMENT' }]);
      const join = async () =>
        (
          await scratch.admin.query<{ status: string; parents_left: number }>(
            `SELECT status::text, parents_left FROM ${q}.q_jobs WHERE flow_ref = 'join'`,
          )
        ).rows[0];
      expect(await join()).toEqual({ status: 'waiting', parents_left: 2 });
      // The two parents left (claimed before the upgrade: their leases still hold) finish in one statement.
      const { rows: held } = await scratch.admin.query<{ id: string; lease_token: string }>(
        `SELECT id::text, lease_token::text FROM ${q}.q_jobs WHERE queue = 'rp' AND lease_token IS NOT NULL ORDER BY id`,
      );
      expect(held).toHaveLength(2);
      expect(
        await upgraded.complete(held.map((h) => ({ id: Number(h.id), leaseToken: h.lease_token, status: 'succeeded' as const, result: 1 }))),
      ).toEqual([true, true]);
      expect(await join()).toEqual({ status: 'queued', parents_left: 0 });
      expect((await claim(upgraded, 'rj')).map((j) => j.type)).toEqual(['join']);
      expect((await claim(upgraded, 'plain')).map((j) => j.payload)).toEqual([{ n: 1 }]);
    } finally {
      await upgraded.close();
    }
  });
});
