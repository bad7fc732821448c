import { useSchemaPerTest } from '@q/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { JOURNAL_TABLE, QError, bundledMigrations, migrate, type MigrationModule } from '../src/index.js';

const REQUEST_TABLES = [
  'q_batch_file_lines',
  'q_batch_files',
  'q_batch_requests',
  'q_batches',
  'q_dispatchers',
  'q_partitions',
  'q_requests',
  'q_results',
];
const QUOTA_TABLES = ['q_quota_admits', 'q_quota_holders', 'q_quota_keys', 'q_quota_slots', 'q_quota_windows'];
const JOB_TABLES = [
  'q_flow_request_specs',
  'q_flow_requests',
  'q_job_edges',
  'q_job_rate_slots',
  'q_flow_spans',
  'q_flows',
  'q_jobs',
  'q_jobs_all',
  'q_jobs_archive',
  'q_jobs_idempotency_keys',
  'q_leader_leases',
  'q_schedules',
];

const { fresh, pools } = useSchemaPerTest('mig', 4);

async function tables(pool: pg.Pool, schema: string): Promise<string[]> {
  const { rows } = await pool.query<{ t: string }>(
    `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 AND table_name <> $2 ORDER BY 1`,
    [schema, JOURNAL_TABLE],
  );
  return rows.map((r) => r.t);
}

/** Records every statement text sent through the pool's connections. */
function recordStatements(pool: pg.Pool): string[] {
  const seen: string[] = [];
  pool.on('connect', (client) => {
    const original = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0];
      seen.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
      return original(...args);
    };
  });
  return seen;
}

describe('migrate', () => {
  it('creates all modules in the current schema and is idempotent', async () => {
    const { schema, pool } = await fresh();
    await migrate(pool, { modules: ['requests', 'quota', 'jobs'] });
    await migrate(pool, { modules: ['requests', 'quota', 'jobs'] });
    expect(await tables(pool, schema.name)).toEqual([...REQUEST_TABLES, ...QUOTA_TABLES, ...JOB_TABLES].sort());
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${JOURNAL_TABLE}`);
    const shipped = (['requests', 'quota', 'jobs'] as MigrationModule[]).flatMap((m) => bundledMigrations(m)).length;
    expect(rows[0].n).toBe(shipped);
    // nothing leaked into public
    const pub = await pool.query(
      `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public' AND table_name = ANY($1::text[])`,
      [[...REQUEST_TABLES, ...QUOTA_TABLES]],
    );
    expect(pub.rows[0].n).toBe(0);
  });

  it('puts the flow-result trigger on q_results once, whichever of jobs and requests is installed first (jobs 0015, requests 0005)', async () => {
    const orders: MigrationModule[][][] = [[['requests'], ['jobs']], [['jobs'], ['requests']], [['jobs', 'requests']], [['requests', 'jobs']]];
    for (const calls of orders) {
      const { schema, pool } = await fresh();
      for (const modules of calls) await migrate(pool, { modules });
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relname = 'q_results' AND t.tgname = 'q_flow_request_result'`,
        [schema.name],
      );
      expect(rows[0]!.n, JSON.stringify(calls)).toBe(1);
    }
  });

  it('8 concurrent callers on a fresh schema all succeed and create each object once', async () => {
    const { schema, pool } = await fresh();
    const racers = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: schema.dsn, max: 1 }));
    pools.push(...racers);
    const outcomes = await Promise.allSettled(racers.map((p) => migrate(p, { modules: ['requests', 'quota', 'jobs'] })));
    expect(outcomes.filter((o) => o.status === 'rejected')).toEqual([]);
    expect(await tables(pool, schema.name)).toEqual([...REQUEST_TABLES, ...QUOTA_TABLES, ...JOB_TABLES].sort());
    const seq = await pool.query(
      `SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'q_dispatch_attempts'`,
      [schema.name],
    );
    expect(seq.rows[0].n).toBe(1);
    const fns = await pool.query(
      `SELECT count(*)::int AS n FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND proname IN ('q_quota_acquire', 'q_quota_admit')`,
      [schema.name],
    );
    expect(fns.rows[0].n).toBe(2);
  });

  it('on a current database sends no DDL and needs no lock beyond reading the journal', async () => {
    const { schema, pool } = await fresh();
    await migrate(pool, { modules: ['requests', 'quota', 'jobs'] });

    const watched = new pg.Pool({ connectionString: schema.dsn, max: 1 });
    pools.push(watched);
    const statements = recordStatements(watched);

    // Another session holds ACCESS EXCLUSIVE locks on the queue tables: any DDL would block.
    const locker = new pg.Client({ connectionString: schema.dsn });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE q_requests, q_quota_slots, q_jobs IN ACCESS EXCLUSIVE MODE');
      await watched.query(`SET lock_timeout = '2s'`);
      await migrate(watched, { modules: ['requests', 'quota', 'jobs'] });
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    const sent = statements.filter((s) => !s.startsWith('SET lock_timeout'));
    expect(sent.length).toBeGreaterThan(0);
    for (const s of sent) {
      expect(s.trim().toUpperCase().startsWith('SELECT')).toBe(true);
      expect(s).not.toMatch(/pg_advisory|CREATE|ALTER|DROP|LOCK/i);
    }
  });

  it('refuses a journal entry this build does not know with SCHEMA_MISMATCH and changes nothing', async () => {
    const { schema, pool } = await fresh();
    await migrate(pool, { modules: ['requests'] });
    await pool.query(`INSERT INTO ${JOURNAL_TABLE} (module, tag, hash) VALUES ('requests', '9999_from_the_future', 'abc')`);
    const before = await tables(pool, schema.name);
    const journalBefore = (await pool.query(`SELECT module, tag, hash FROM ${JOURNAL_TABLE} ORDER BY 1, 2`)).rows;

    const err = await migrate(pool, { modules: ['requests', 'quota'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QError);
    expect((err as QError).code).toBe('SCHEMA_MISMATCH');
    expect(await tables(pool, schema.name)).toEqual(before);
    expect((await pool.query(`SELECT module, tag, hash FROM ${JOURNAL_TABLE} ORDER BY 1, 2`)).rows).toEqual(journalBefore);
  });

  it('refuses a known migration whose recorded hash differs (another build)', async () => {
    const { pool } = await fresh();
    await migrate(pool, { modules: ['quota'] });
    await pool.query(`UPDATE ${JOURNAL_TABLE} SET hash = 'different' WHERE module = 'quota'`);
    await expect(migrate(pool, { modules: ['quota'] })).rejects.toMatchObject({ code: 'SCHEMA_MISMATCH' });
  });

  it("modules: ['quota'] creates only quota objects; ['requests'] only request objects", async () => {
    const a = await fresh();
    await migrate(a.pool, { modules: ['quota'] });
    expect(await tables(a.pool, a.schema.name)).toEqual(QUOTA_TABLES);
    const enumA = await a.pool.query(`SELECT to_regtype('q_job_status') AS t, to_regclass('q_dispatch_attempts') AS s`);
    expect(enumA.rows[0]).toEqual({ t: null, s: null });

    const b = await fresh();
    await migrate(b.pool, { modules: ['requests'] });
    expect(await tables(b.pool, b.schema.name)).toEqual(REQUEST_TABLES);
    const fn = await b.pool.query(`SELECT to_regproc('q_quota_admit') AS f`);
    expect(fn.rows[0].f).toBeNull();
  });

  it('sets fixed-threshold autovacuum storage parameters on the queue tables', async () => {
    const { pool } = await fresh();
    await migrate(pool, { modules: ['requests', 'quota', 'jobs'] });
    const { rows } = await pool.query<{ relname: string; reloptions: string[] }>(
      `SELECT relname, reloptions FROM pg_class WHERE oid IN ('q_requests'::regclass, 'q_results'::regclass, 'q_jobs'::regclass, 'q_quota_admits'::regclass)`,
    );
    expect(rows).toHaveLength(4);
    for (const r of rows) {
      expect(r.reloptions).toEqual(
        expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=10000', 'autovacuum_vacuum_cost_delay=0']),
      );
    }
    const req = rows.find((r) => r.relname === 'q_requests')!;
    expect(req.reloptions).toEqual(expect.arrayContaining(['fillfactor=70', 'autovacuum_analyze_scale_factor=0.02']));
    // No update of a live job is HOT any more (0006_archive): its pages fill.
    expect(rows.find((r) => r.relname === 'q_jobs')!.reloptions).toContain('fillfactor=100');
  });

  it('rejects unknown modules with INVALID_ARGUMENT before touching the database', async () => {
    const { pool } = await fresh();
    await expect(migrate(pool, { modules: ['nope' as MigrationModule] })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(migrate(pool, { modules: [] })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('migrate with the schema option', () => {
  it('creates a missing schema and migrates into it whatever the search_path', async () => {
    const { schema: base } = await fresh();
    const pool = new pg.Pool({ connectionString: base.serverDsn, max: 2 });
    pools.push(pool);
    const target = `${base.name}_opt`;
    try {
      await migrate(pool, { modules: ['requests', 'quota', 'jobs'], schema: target });
      await migrate(pool, { modules: ['requests', 'quota', 'jobs'], schema: target });
      expect(await tables(pool, target)).toEqual([...REQUEST_TABLES, ...QUOTA_TABLES, ...JOB_TABLES].sort());
      const cur = await pool.query<{ s: string }>('SELECT current_schema() AS s');
      expect(await tables(pool, cur.rows[0]?.s ?? 'public')).not.toContain('q_jobs');
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS "${target}" CASCADE`);
    }
  });

  it('a missing schema the role may not create is SCHEMA_MISMATCH naming the cause', async () => {
    const { schema: base } = await fresh();
    const admin = new pg.Pool({ connectionString: base.serverDsn, max: 1 });
    pools.push(admin);
    const role = `${base.name}_nocreate`;
    await admin.query(`CREATE ROLE "${role}" LOGIN`);
    try {
      const u = new URL(base.serverDsn);
      u.username = role;
      u.password = '';
      const limited = new pg.Pool({ connectionString: u.toString(), max: 1 });
      pools.push(limited);
      const err = await migrate(limited, { modules: ['jobs'], schema: `${base.name}_denied` }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QError);
      expect((err as QError).code).toBe('SCHEMA_MISMATCH');
      expect((err as QError).message).toMatch(/may not create it/);
      await limited.end();
      pools.splice(pools.indexOf(limited), 1);
    } finally {
      await admin.query(`DROP ROLE IF EXISTS "${role}"`);
    }
  });

  it('refuses an over-long schema name with INVALID_ARGUMENT before connecting', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', max: 1 });
    pools.push(pool);
    const err = await migrate(pool, { modules: ['jobs'], schema: 'x'.repeat(64) }).catch((e: unknown) => e);
    expect((err as QError).code).toBe('INVALID_ARGUMENT');
  });
});
