// Quota migration 0004 (q_quota_keys.last_limit) on a schema through 0003: the slots held keep
// counting, and the next acquire of a key records its limit.
import { JOURNAL_TABLE, bundledMigrations } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { useScratchSchemas } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { QuotaStore } from '../src/index.js';

describe('quota migration 0004 (key limits) on a schema through 0003', () => {
  const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });

  it('keeps the slots held; the next acquire records the limit', async () => {
    const older = await scratch.olderBuild('qlimitup', bundledMigrations('quota'), '0004');
    await scratch.admin.query(`INSERT INTO ${older.quoted}.q_quota_keys (key) VALUES ('k')`);
    await scratch.admin.query(
      `INSERT INTO ${older.quoted}.q_quota_holders (holder, expires_ms) VALUES ('h', (extract(epoch FROM clock_timestamp()) * 1000)::int8 + 600000)`,
    );
    await scratch.admin.query(`INSERT INTO ${older.quoted}.q_quota_slots (key, holder, used) VALUES ('k', 'h', 2)`);
    const store = await QuotaStore.open(older.dsn, { maxConns: 2 }); // applies 0004
    try {
      const before = await scratch.admin.query(`SELECT key, last_limit FROM ${older.quoted}.q_quota_keys`);
      expect(before.rows).toEqual([{ key: 'k', last_limit: null }]);
      // 2 of 3 held before the upgrade still count.
      expect(await store.acquireQuotaSlots('h', 'k', 5, 3)).toBe(1);
      const after = await scratch.admin.query(`SELECT last_limit FROM ${older.quoted}.q_quota_keys WHERE key = 'k'`);
      expect(after.rows).toEqual([{ last_limit: 3 }]);
    } finally {
      await store.close();
    }
  });
});
