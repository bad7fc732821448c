import { JOURNAL_TABLE, QErrorCode, bundledMigrations, isQError } from '@q/schema';
import { quoteIdent } from '@q/schema/internal';
import { onOneConnection, testDatabaseUrl, useScratchSchemas, withClient } from '@q/testing';
import { describe, expect, it } from 'vitest';
import { RequestStore, partitionOf, stampOf } from '../src/index.js';
import { ALL, at, req } from './requests/helpers.js';

// Schema placement of the request store: the `schema` option (no search_path needed), two
// schemas on one pool, the transaction-pooler mode, and the upgrade to the q_ table names.

const scratch = useScratchSchemas({ quoteIdent, journalTable: JOURNAL_TABLE });
const { admin, name } = scratch;

describe('RequestStore schema placement', () => {
  it('migrating a database at the previous schema keeps its requests, results, partitions and sequences usable under the q_ names', async () => {
    const { schema: s, quoted: q, dsn } = await scratch.olderBuild('supg', bundledMigrations('requests'), '0003');
    // State written by the previous build: partitions, one live dispatcher, two pending
    // requests, one result, and attempts already drawn from the sequence.
    await admin.query(`INSERT INTO ${q}.async_partitions (queue, partition_id) SELECT 'q', g FROM generate_series(0, 63) g`);
    await admin.query(`INSERT INTO ${q}.async_dispatchers (queue, owner, expires_ms) VALUES ('q', 'old', 1)`);
    await admin.query(
      `INSERT INTO ${q}.async_requests (id, request_token, queue, partition_id, deadline, envelope, payload, created_at)
       VALUES ('a', 'ta', 'q', $1, 10, 'ea', '\\x01', 1), ('b', 'tb', 'q', $2, 20, 'eb', '\\x02', 2)`,
      [partitionOf('a'), partitionOf('b')],
    );
    await admin.query(`INSERT INTO ${q}.async_results (route, id, request_token, payload, created_at) VALUES ('r', 'old', 't', 'old-result', 1)`);
    await admin.query(`SELECT setval('${s}.async_dispatch_attempts', 41)`);

    const store = await RequestStore.open(dsn, { maxConns: 2 });
    try {
      const gone = await admin.query(`SELECT to_regclass($1) AS r, to_regclass($2) AS p, to_regproc($3) AS f`, [
        `${q}.async_requests`,
        `${q}.async_partitions`,
        `${q}.async_dispatch`,
      ]);
      expect(gone.rows[0]).toEqual({ r: null, p: null, f: null });
      const leases = await store.acquirePartitions('q', 'me', at(100), 60_000, 64);
      expect(leases.map((l) => l.partition)).toEqual(ALL);
      const got = await store.dispatch('q', 'me', at(100), 10);
      expect(got.map((r) => [r.id, r.envelope, Buffer.from(r.payload).toString('hex')])).toEqual([
        ['a', 'ea', '01'],
        ['b', 'eb', '02'],
      ]);
      expect(got.map((r) => r.attempt)).toEqual([42, 43]); // the sequence went on where it was
      expect(
        await store.ack(
          'me',
          got.map((r) => ({ ...stampOf(r), route: 'r', payload: `done-${r.id}` })),
        ),
      ).toEqual([true, true]);
      const results = await store.popResults('r', 100, 10);
      expect(results.map((r) => r.payload)).toEqual(['old-result', 'done-a', 'done-b']);
      expect(results[1]!.seq).toBeGreaterThan(results[0]!.seq);
      // The old dispatcher row is still a (lapsed) member the heartbeat drops.
      expect((await store.heartbeat('q', 'me', at(100), 60_000, true)).members).toBe(1);
      expect((await admin.query(`SELECT count(*)::int AS n FROM ${q}.q_dispatchers`)).rows[0].n).toBe(1);
    } finally {
      await store.close();
    }
  });

  it('migrating a database at 0003 (before the Batch API tables) keeps every request, partition and result, and adds the batch tables', async () => {
    const { schema: s, quoted: q, dsn } = await scratch.olderBuild('sbat', bundledMigrations('requests'), '0004');
    await admin.query(`INSERT INTO ${q}.q_partitions (queue, partition_id) SELECT 'q', g FROM generate_series(0, 63) g`);
    await admin.query(
      `INSERT INTO ${q}.q_requests (id, request_token, queue, partition_id, deadline, envelope, payload, created_at)
       VALUES ('a', 'ta', 'q', $1, 10, 'ea', '\\x01', 1)`,
      [partitionOf('a')],
    );
    await admin.query(`INSERT INTO ${q}.q_results (route, id, request_token, payload, created_at) VALUES ('r', 'old', 't', 'old-result', 1)`);
    expect((await admin.query(`SELECT to_regclass($1) AS b`, [`${q}.q_batches`])).rows[0].b).toBeNull();

    const store = await RequestStore.open(dsn, { maxConns: 2 });
    try {
      const made = await admin.query<{ t: string }>(
        `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'q_batch%' ORDER BY 1`,
        [s],
      );
      expect(made.rows.map((r) => r.t)).toEqual(['q_batch_file_lines', 'q_batch_files', 'q_batch_requests', 'q_batches']);
      await store.acquirePartitions('q', 'me', at(100), 60_000, 64);
      const got = await store.dispatch('q', 'me', at(100), 10);
      expect(got.map((r) => [r.id, r.envelope])).toEqual([['a', 'ea']]);
      await store.ack('me', [{ ...stampOf(got[0]!), route: 'r', payload: 'done-a' }]);
      expect((await store.popResults('r', 100, 10)).map((r) => r.payload)).toEqual(['old-result', 'done-a']);
    } finally {
      await store.close();
    }
  });

  it('schema: X on a DSN whose search_path points elsewhere creates X and works end to end there', async () => {
    const { decoy, target, dsn } = await scratch.decoyAndTarget('s');
    const store = await RequestStore.open(dsn, { schema: target, maxConns: 2 });
    try {
      expect(store.schema).toBe(target);
      await store.enqueue([req('x1'), req('x2', { deadline: 2000 })]);
      // Written through a caller's connection whose search_path is the decoy: still lands in X.
      await withClient(dsn, async (c) => {
        await c.query('BEGIN');
        await store.enqueue([req('x3', { deadline: 3000 })], { client: c });
        await c.query('COMMIT');
      });
      await store.ensurePartitions('q');
      await store.acquirePartitions('q', 'o', at(10), 60_000, 64);
      expect((await store.backlog('q', 10, [1500])).depth).toBe(3);
      const got = await store.dispatch('q', 'o', at(10), 10);
      expect(got.map((r) => r.id)).toEqual(['x1', 'x2', 'x3']);
      await store.ack(
        'o',
        got.map((r) => ({ ...stampOf(r), route: 'r', payload: r.id })),
      );
      expect((await store.popResults('r', 10, 10)).map((r) => r.payload)).toEqual(['x1', 'x2', 'x3']);
      expect(await scratch.tableCounts([decoy, target])).toEqual([{ schema: target, n: 9 }]); // 8 tables + the journal, none in the decoy
    } finally {
      await store.close();
    }
  });

  it('two stores of different schemas on one pool (one connection) do not mix', async () => {
    await scratch.twoSchemasOnOneConnection(
      's',
      (pool, schema) => RequestStore.fromPool(pool, { schema }),
      async (sa, sb) => {
        await sa.enqueue([req('only-a')]);
        await sb.enqueue([req('only-b1'), req('only-b2')]);
        for (const s of [sa, sb]) {
          await s.ensurePartitions('q');
          await s.acquirePartitions('q', 'o', at(10), 60_000, 64);
        }
        expect(await sa.hasRequests('q')).toBe(true);
        expect((await sa.backlog('q', 10, [])).depth).toBe(1);
        expect((await sb.backlog('q', 10, [])).depth).toBe(2);
        expect((await sa.dispatch('q', 'o', at(10), 10)).map((r) => r.id)).toEqual(['only-a']);
        expect((await sb.dispatch('q', 'o', at(10), 10)).map((r) => r.id)).toEqual(['only-b1', 'only-b2']);
      },
    );
  });

  it("pooler: 'transaction' sends every statement unnamed (nothing prepared on the server session)", async () => {
    const s = name('spool');
    await onOneConnection(async (pool) => {
      const prepared = async (): Promise<number> =>
        (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements')).rows[0]!.n;
      const unnamed = await RequestStore.fromPool(pool, { schema: s, pooler: 'transaction' });
      await unnamed.enqueue([req('p1')]);
      await unnamed.ensurePartitions('q');
      await unnamed.backlog('q', 1, [1]);
      expect(await prepared()).toBe(0);
      const named = await RequestStore.fromPool(pool, { schema: s, migrate: false });
      await named.backlog('q', 1, [1]);
      expect(await prepared()).toBe(1);
    });
  });

  it('a data exception (SQLSTATE class 22: the attempt sequence exhausted) is INVALID_ARGUMENT, not CONNECTION', async () => {
    const s = name('sexh');
    const store = await RequestStore.open(testDatabaseUrl(), { schema: s, maxConns: 2 });
    try {
      await store.enqueue([req('e1')]);
      await store.ensurePartitions('q');
      await store.acquirePartitions('q', 'o', at(10), 60_000, 64);
      await admin.query(`SELECT setval('${s}.q_dispatch_attempts', 9223372036854775807)`);
      const err = await store.dispatch('q', 'o', at(10), 1).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isQError(err) && err.code).toBe(QErrorCode.INVALID_ARGUMENT);
      expect((err as Error).message).toMatch(/^dispatch: .*\(SQLSTATE 2200H\)$/);
    } finally {
      await store.close();
    }
  });
});
