import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { useScratchSchemas } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { QuotaStore, createQuota } from '../src/index.js';

// Schema placement of the quota store: the `schema` option (no search_path needed), two schemas
// on one pool, and the upgrade to the q_ table names.

const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });
const { admin } = scratch;

describe('QuotaStore schema placement', () => {
  it('migrating a database at the previous schema keeps its holders, slots, windows and admissions counting under the q_ names', async () => {
    const { quoted: q, dsn } = await scratch.olderBuild('qupg', bundledMigrations('quota'), '0003');
    const now = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;
    // Written by the previous build: a live holder with 2 slots of k, a lapsed one, and 3
    // admissions of r in the current minute.
    await admin.query(`INSERT INTO ${q}.async_quota_holders (holder, expires_ms) VALUES ('live', ${now} + 600000), ('gone', ${now} - 1)`);
    await admin.query(`INSERT INTO ${q}.async_quota_keys (key) VALUES ('k')`);
    await admin.query(`INSERT INTO ${q}.async_quota_slots (key, holder, used) VALUES ('k', 'live', 2), ('k', 'gone', 5)`);
    await admin.query(`INSERT INTO ${q}.async_quota_windows (key, window_ms, used) VALUES ('r', 60000, 3)`);
    await admin.query(`INSERT INTO ${q}.async_quota_admits (key, window_ms, at_ms, n) VALUES ('r', 60000, ${now}, 3)`);

    const store = await QuotaStore.open(dsn, { maxConns: 2 });
    try {
      const gone = await admin.query(`SELECT to_regclass($1) AS t, to_regproc($2) AS f`, [`${q}.async_quota_slots`, `${q}.async_quota_acquire`]);
      expect(gone.rows[0]).toEqual({ t: null, f: null });
      // Limit 3: the live holder's 2 slots count, the lapsed holder's 5 do not.
      expect(await store.acquireQuotaSlots('live', 'k', 5, 3)).toBe(1);
      expect(await store.renewQuotaHolder('live', 60_000)).toBe(true);
      expect(await store.renewQuotaHolder('gone', 60_000)).toBe(false);
      // Limit 4 in the window: the 3 old admissions count.
      expect(await store.admitQuota('r', 5, 4, 60_000)).toBe(1);
      await store.releaseQuotaSlots('live', ['k'], [3]);
      expect(await store.acquireQuotaSlots('live', 'k', 5, 3)).toBe(3);
    } finally {
      await store.close();
    }
  });

  it('schema: X on a DSN whose search_path points elsewhere creates X and works end to end there', async () => {
    const { decoy, target, dsn } = await scratch.decoyAndTarget('q');
    const quota = await createQuota({ dsn, schema: target, maxConns: 2 });
    try {
      const release = await quota.acquire('k', 1);
      expect(await quota.admit('r', 2, 60_000)).toBe(true);
      expect(release).not.toBeNull();
      await release!();
      expect(await quota.store.schema()).toBe(target);
      expect(await scratch.tableCounts([decoy, target])).toEqual([{ schema: target, n: 6 }]); // 5 tables + the journal, none in the decoy
      const admits = await admin.query(`SELECT sum(n)::int AS n FROM ${quoteIdent(target)}.q_quota_admits WHERE key = 'r'`);
      expect(admits.rows[0].n).toBe(1);
    } finally {
      await quota.close();
    }
  });

  it('two stores of different schemas on one pool (one connection) do not mix', async () => {
    await scratch.twoSchemasOnOneConnection(
      'q',
      (pool, schema) => createQuota({ pool, schema }),
      async (qa, qb) => {
        // Limit 1 on the same key in both: each schema counts its own slot.
        const ra = await qa.acquire('k', 1);
        const rb = await qb.acquire('k', 1);
        expect(await qa.admit('r', 1, 60_000)).toBe(true);
        expect(await qb.admit('r', 1, 60_000)).toBe(true);
        expect(await qa.admit('r', 1, 60_000)).toBe(false);
        expect(ra).not.toBeNull();
        expect(rb).not.toBeNull();
        await ra!();
        await rb!();
      },
    );
  });
});
