/**
 * What the job table's layout costs the database, per job: candidate layouts side by side, each
 * in a scratch schema of its own, driven by the same loop on one connection — enqueue in
 * statements of 1,000, then claim 500 / complete those 500 until none is left — and measured as
 * the backend's CPU (read from /proc, so the server must run on this machine) and the WAL it
 * wrote (`pg_current_wal_lsn()` differences), both per job. Rounds are interleaved (every layout
 * once per round, the order rotated) and medians reported.
 *
 *   DSN=postgres://… node bench/dist/storage-layouts.js [--jobs 20000] [--reps 3] [--retained 1000000]
 *     [--layouts archive,archive-brin,raw]
 *
 * With `--retained N`, N finished jobs are kept where the layout keeps its history (the wide
 * table, or the archive) before the drain, then `VACUUM ANALYZE` and a `CHECKPOINT`, as in the
 * `job-drain-retained` scenario: what a layout pays for a long history.
 *
 * The layouts (the statements keep the parts of q's that write: a fenced lease token, the attempt
 * count, the timestamps; no lock keys, no idempotency keys):
 * - `current`: q's tables as its migrations leave them (created by `JobStore.open`), written as
 *   before the archive: a completion updates the row to `succeeded`, which q's trigger turns into
 *   a move to the archive (the path of an application's own SQL, not of q's worker);
 * - `narrow-active`: the wide row keeps only its primary key and uuid index (fillfactor 50), so
 *   its updates are HOT; a narrow `active` table holds what claims and lease expiry search;
 * - `claim-narrow`: as `narrow-active`, but a claim writes only the narrow row (and reads the
 *   wide one): the wide row is written once, at completion;
 * - `archive`: q's hot table of live jobs; completion moves the row into an archive table (what
 *   q's completion statement does, without its lock keys, retries and report);
 * - `archive-no-uuid`, `-no-lease`, `-no-both`: as `archive`, without the hot table's uuid
 *   index, its lease-expiry index, or both: what those index entries cost a claim;
 * - `archive-brin`: as `archive`, with block-range indexes on the archive's id, uuid and finish
 *   time instead of its primary key and unique uuid index: what its two b-trees cost;
 * - `home-outcome`: the wide row is written once, at enqueue, and never moved; a narrow `active`
 *   row per live job takes the claims, and a completion deletes it and inserts a narrow outcome;
 * - `delete`: completion deletes the row, keeping no history (what `CONTRACT.md` §5 rules out:
 *   shown for the price of that history);
 * - `raw`: the raw-SQL limit of `systems/raw-jobs.ts` (six columns, one index).
 *
 * Nothing else should run meanwhile; every schema it makes is dropped at the end.
 */
import pg from 'pg';
import { JobStore } from '@q/store';
import { cpuSeconds } from './backend-cpu.js';
import { ARCHIVED_ON_SUCCESS, JOB_COLUMNS } from './job-columns.js';
import { summarize } from './stats.js';
import { toolArgs } from './tool-args.js';

const args = toolArgs();
const dsn = args.dsn;
const JOBS = args.num('jobs', 20_000);
const REPS = args.num('reps', 3);
const RETAINED = args.num('retained', 0);
/** `--layouts a,b`: only these (the first is then the baseline unless `current` is among them). */
const ONLY = args
  .str('layouts', '')
  .split(',')
  .filter((name) => name !== '');
const ENQUEUE_BATCH = 1_000;
const CLAIM_BATCH = 500;
const PREFIX = 'q_layout_';

/** The statements of one layout: `$1` = how many (enqueue, claim); complete gets ids and tokens. */
interface Layout {
  name: string;
  /** Creates the layout's tables in `schema` (which exists, empty). */
  create(db: pg.Client, schema: string): Promise<void>;
  enqueue: string;
  /** Returns `id` and `lease_token` of each job leased. */
  claim: string;
  /** `$1` ids, `$2` tokens; writes every outcome (the loop checks the row count). */
  complete: string;
  /** Where finished jobs are kept (a table with q's job columns), if the layout keeps them. */
  history?: string;
}

/** Where q's own `q_jobs` is made once, for the other layouts to copy. */
const TEMPLATE = `${PREFIX}template`;

/** q's `q_jobs` columns and defaults, without its indexes (each layout adds its own). */
async function likeCurrent(db: pg.Client, schema: string, table: string, storage = ''): Promise<void> {
  await db.query(`CREATE TABLE ${schema}.${table} (LIKE ${TEMPLATE}.q_jobs INCLUDING DEFAULTS) ${storage}`);
  await db.query(`ALTER TABLE ${schema}.${table} ADD PRIMARY KEY (id)`);
  await db.query(`CREATE UNIQUE INDEX ON ${schema}.${table} (uuid)`);
}

/**
 * A time-ordered uuid, as q's `JobStore.enqueue` makes (v7): the milliseconds, then random hex.
 * Random (v4) keys would spread every index write of a non-HOT update over the whole uuid index.
 */
const TIME_UUID = `(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::int8), 12, '0') || substr(md5(random()::text), 1, 20))::uuid`;

const INSERT_WIDE = (s: string) => `INSERT INTO ${s}.q_jobs (id, uuid, queue, job_type, payload, status, run_at)
  SELECT nextval('${s}.ids'), ${TIME_UUID}, 'q', 'noop', jsonb_build_object('i', g), 'queued', now()
  FROM generate_series(1, $1) g`;
const PICK = (table: string, ready: string) => `SELECT id FROM ${table} WHERE queue = 'q' AND ${ready} AND run_at <= now()
  ORDER BY priority DESC NULLS LAST, run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED`;
const LEASE_WIDE = `status = 'leased', leased_by = 'w', lease_token = gen_random_uuid(),
  lease_expires_at = now() + interval '30 s', heartbeat_at = now(), attempt = j.attempt + 1, updated_at = now()`;
const FINISH_WIDE = `status = 'succeeded', result = 'null', finished_at = now(), leased_by = NULL, lease_token = NULL,
  lease_expires_at = NULL, updated_at = now()`;
const OUTCOMES = `unnest($1::int8[], $2::uuid[]) AS u(id, token)`;

/** Everything the narrow tables of `narrow-active` and `claim-narrow` hold. */
async function createActive(db: pg.Client, s: string): Promise<void> {
  await db.query(`CREATE TABLE ${s}.active (id int8 PRIMARY KEY, queue text NOT NULL, priority int NOT NULL,
    run_at timestamptz NOT NULL, leased bool NOT NULL DEFAULT false, lease_token uuid, leased_by text,
    attempt int NOT NULL DEFAULT 0, lease_expires_at timestamptz) WITH (fillfactor = 70)`);
  await db.query(`CREATE INDEX ON ${s}.active (queue, priority DESC NULLS LAST, run_at, id) WHERE NOT leased`);
  await db.query(`CREATE INDEX ON ${s}.active (lease_expires_at) WHERE leased`);
  await db.query(`CREATE SEQUENCE ${s}.ids`);
}

/** A claim that leases the narrow `active` rows (`createActive`) and reads the wide ones. */
const CLAIM_ACTIVE = (s: string) => `WITH a AS (UPDATE ${s}.active a SET leased = true, lease_token = gen_random_uuid(), leased_by = 'w',
      attempt = a.attempt + 1, lease_expires_at = now() + interval '30 s'
    FROM (${PICK(`${s}.active`, 'NOT leased')}) p WHERE a.id = p.id RETURNING a.*)
  SELECT j.*, a.lease_token AS lease_token, a.attempt AS attempt FROM a JOIN ${s}.q_jobs j ON j.id = a.id`;

/** The CTE `d(id, attempt)`: the fenced delete of the finished jobs' `active` rows. */
const FINISH_ACTIVE = (s: string) => `d AS (DELETE FROM ${s}.active a USING ${OUTCOMES}
    WHERE a.id = ANY($1) AND a.id = u.id AND a.lease_token = u.token RETURNING a.id, a.attempt)`;

/** History, tables and enqueue of a layout with a narrow `active` table beside the wide row. */
function besideActive(schema: string, fillfactor: number): Pick<Layout, 'history' | 'create' | 'enqueue'> {
  return {
    history: `${schema}.q_jobs`,
    create: async (db) => {
      await likeCurrent(db, schema, 'q_jobs', `WITH (fillfactor = ${fillfactor})`);
      await createActive(db, schema);
    },
    enqueue: `WITH i AS (${INSERT_WIDE(schema)} RETURNING id, queue, priority, run_at)
      INSERT INTO ${schema}.active (id, queue, priority, run_at) SELECT id, queue, priority, run_at FROM i`,
  };
}

/** Which indexes an `archive`-family layout has (see the header). */
interface ArchiveIndexes {
  /** The hot table's unique uuid index. */
  hotUuid: boolean;
  /** The hot table's partial lease-expiry index. */
  hotLease: boolean;
  /** The archive's: primary key and unique uuid (`btree`), or block-range indexes only (`brin`). */
  archive: 'btree' | 'brin';
}

/** A hot table of live jobs whose completion moves the row into an archive, with `ix`'s indexes. */
function archiveLike(name: string, schema: string, ix: ArchiveIndexes): Layout {
  return {
    name,
    history: `${schema}.archive`,
    create: async (db) => {
      await db.query(`CREATE TABLE ${schema}.q_jobs (LIKE ${TEMPLATE}.q_jobs INCLUDING DEFAULTS)`);
      await db.query(`ALTER TABLE ${schema}.q_jobs ADD PRIMARY KEY (id)`);
      if (ix.hotUuid) await db.query(`CREATE UNIQUE INDEX ON ${schema}.q_jobs (uuid)`);
      await db.query(`CREATE INDEX ON ${schema}.q_jobs (queue, priority DESC NULLS LAST, run_at, id) WHERE status = 'queued'`);
      if (ix.hotLease) await db.query(`CREATE INDEX ON ${schema}.q_jobs (lease_expires_at) WHERE status IN ('leased', 'running')`);
      if (ix.archive === 'btree') await likeCurrent(db, schema, 'archive');
      else {
        await db.query(`CREATE TABLE ${schema}.archive (LIKE ${TEMPLATE}.q_jobs INCLUDING DEFAULTS)`);
        for (const column of ['id', 'uuid', 'finished_at']) await db.query(`CREATE INDEX ON ${schema}.archive USING brin (${column})`);
      }
      await db.query(`CREATE SEQUENCE ${schema}.ids`);
    },
    enqueue: INSERT_WIDE(schema),
    claim: `UPDATE ${schema}.q_jobs j SET ${LEASE_WIDE} FROM (${PICK(`${schema}.q_jobs`, `status = 'queued'`)}) p
      WHERE j.id = p.id RETURNING j.*`,
    complete: `WITH d AS (DELETE FROM ${schema}.q_jobs j USING ${OUTCOMES}
        WHERE j.id = ANY($1) AND j.id = u.id AND j.lease_token = u.token RETURNING j.*)
      INSERT INTO ${schema}.archive (${JOB_COLUMNS.join(', ')})
      SELECT ${ARCHIVED_ON_SUCCESS} FROM d`,
  };
}

function layouts(): Array<Layout & { schema: string }> {
  const s = (name: string) => `${PREFIX}${name.replace(/-/g, '_')}`;
  const cur = s('current');
  const na = s('narrow-active');
  const cn = s('claim-narrow');
  const ho = s('home-outcome');
  const de = s('delete');
  const raw = s('raw');
  const list: Layout[] = [
    {
      name: 'current',
      history: `${cur}.q_jobs`,
      create: async () => {
        const store = await JobStore.open(dsn, { schema: cur, maxConns: 1 });
        await store.close();
      },
      enqueue: `INSERT INTO ${cur}.q_jobs (uuid, queue, job_type, payload, status, run_at)
        SELECT ${TIME_UUID}, 'q', 'noop', jsonb_build_object('i', g), 'queued', now() FROM generate_series(1, $1) g`,
      claim: `UPDATE ${cur}.q_jobs j SET ${LEASE_WIDE} FROM (${PICK(`${cur}.q_jobs`, `status = 'queued'`)}) p
        WHERE j.id = p.id RETURNING j.*`,
      complete: `UPDATE ${cur}.q_jobs j SET ${FINISH_WIDE} FROM ${OUTCOMES}
        WHERE j.id = ANY($1) AND j.id = u.id AND j.lease_token = u.token`,
    },
    {
      name: 'narrow-active',
      ...besideActive(na, 50),
      claim: `WITH a AS (UPDATE ${na}.active a SET leased = true, lease_expires_at = now() + interval '30 s'
          FROM (${PICK(`${na}.active`, 'NOT leased')}) p WHERE a.id = p.id RETURNING a.id)
        UPDATE ${na}.q_jobs j SET ${LEASE_WIDE} FROM a WHERE j.id = a.id RETURNING j.*`,
      complete: `WITH u AS (UPDATE ${na}.q_jobs j SET ${FINISH_WIDE} FROM ${OUTCOMES}
          WHERE j.id = ANY($1) AND j.id = u.id AND j.lease_token = u.token RETURNING j.id)
        DELETE FROM ${na}.active a USING u WHERE a.id = u.id`,
    },
    {
      name: 'claim-narrow',
      ...besideActive(cn, 70),
      claim: CLAIM_ACTIVE(cn),
      complete: `WITH ${FINISH_ACTIVE(cn)}
        UPDATE ${cn}.q_jobs j SET status = 'succeeded', attempt = d.attempt, result = 'null', finished_at = now(),
          updated_at = now() FROM d WHERE j.id = d.id`,
    },
    archiveLike('archive', s('archive'), { hotUuid: true, hotLease: true, archive: 'btree' }),
    archiveLike('archive-no-uuid', s('archive-no-uuid'), { hotUuid: false, hotLease: true, archive: 'btree' }),
    archiveLike('archive-no-lease', s('archive-no-lease'), { hotUuid: true, hotLease: false, archive: 'btree' }),
    archiveLike('archive-no-both', s('archive-no-both'), { hotUuid: false, hotLease: false, archive: 'btree' }),
    archiveLike('archive-brin', s('archive-brin'), { hotUuid: true, hotLease: true, archive: 'brin' }),
    (() => {
      const beside = besideActive(ho, 100);
      return {
        name: 'home-outcome',
        ...beside,
        create: async (db: pg.Client, schema: string) => {
          await beside.create(db, schema);
          await db.query(`CREATE TABLE ${ho}.outcome (id int8 PRIMARY KEY, status text NOT NULL, attempt int NOT NULL,
            result jsonb, finished_at timestamptz NOT NULL)`);
        },
        claim: CLAIM_ACTIVE(ho),
        complete: `WITH ${FINISH_ACTIVE(ho)}
          INSERT INTO ${ho}.outcome (id, status, attempt, result, finished_at)
          SELECT id, 'succeeded', attempt, 'null', now() FROM d`,
      };
    })(),
    {
      name: 'delete',
      create: async (db) => {
        await likeCurrent(db, de, 'q_jobs');
        await db.query(`CREATE INDEX ON ${de}.q_jobs (queue, priority DESC NULLS LAST, run_at, id) WHERE status = 'queued'`);
        await db.query(`CREATE INDEX ON ${de}.q_jobs (lease_expires_at) WHERE status IN ('leased', 'running')`);
        await db.query(`CREATE SEQUENCE ${de}.ids`);
      },
      enqueue: INSERT_WIDE(de),
      claim: `UPDATE ${de}.q_jobs j SET ${LEASE_WIDE} FROM (${PICK(`${de}.q_jobs`, `status = 'queued'`)}) p
        WHERE j.id = p.id RETURNING j.*`,
      complete: `DELETE FROM ${de}.q_jobs j USING ${OUTCOMES} WHERE j.id = ANY($1) AND j.id = u.id AND j.lease_token = u.token`,
    },
    {
      name: 'raw',
      create: async (db) => {
        await db.query(`CREATE TABLE ${raw}.jobs (id bigserial PRIMARY KEY, queue text NOT NULL, payload jsonb NOT NULL,
          run_at timestamptz NOT NULL DEFAULT now(), locked_at timestamptz, lease_token uuid)`);
        await db.query(`CREATE INDEX ON ${raw}.jobs (queue, run_at, id) WHERE locked_at IS NULL`);
      },
      enqueue: `INSERT INTO ${raw}.jobs (queue, payload) SELECT 'q', jsonb_build_object('i', g) FROM generate_series(1, $1) g`,
      claim: `UPDATE ${raw}.jobs j SET locked_at = now(), lease_token = gen_random_uuid()
        FROM (SELECT id FROM ${raw}.jobs WHERE queue = 'q' AND locked_at IS NULL AND run_at <= now()
              ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) p WHERE j.id = p.id RETURNING j.*`,
      complete: `DELETE FROM ${raw}.jobs j USING ${OUTCOMES} WHERE j.id = ANY($1) AND j.id = u.id AND j.lease_token = u.token`,
    },
  ];
  const unknown = ONLY.filter((name) => !list.some((l) => l.name === name));
  if (unknown.length > 0) throw new Error(`--layouts: no layout ${unknown.join(', ')} (there are ${list.map((l) => l.name).join(', ')})`);
  return list.filter((l) => ONLY.length === 0 || ONLY.includes(l.name)).map((l) => ({ ...l, schema: s(l.name) }));
}

interface Sample {
  enqueueMicros: number;
  enqueueWal: number;
  drainMicros: number;
  drainWal: number;
  hotShare: number;
}

async function runOnce(db: pg.Client, pid: number, layout: Layout & { schema: string }): Promise<Sample> {
  await db.query(`DROP SCHEMA IF EXISTS ${layout.schema} CASCADE`);
  if (layout.name !== 'current') await db.query(`CREATE SCHEMA ${layout.schema}`);
  await layout.create(db, layout.schema);
  if (RETAINED > 0 && layout.history) {
    // Kept jobs come first: their ids and uuids sort below those the drain's jobs get.
    await db.query(
      `INSERT INTO ${layout.history} (id, uuid, queue, job_type, payload, status, attempt, result, finished_at)
       OVERRIDING SYSTEM VALUE
       SELECT g - $1::int, ${TIME_UUID}, 'history', 'noop', jsonb_build_object('i', g), 'succeeded', 1, 'null', now() - interval '1 hour'
       FROM generate_series(1, $1::int) g`,
      [RETAINED],
    );
    await db.query(`VACUUM ANALYZE ${layout.history}`);
  }
  await db.query('CHECKPOINT');
  const lsn = async (): Promise<bigint> =>
    BigInt((await db.query<{ b: string }>(`SELECT (pg_current_wal_lsn() - '0/0')::text AS b`)).rows[0]?.b ?? '0');
  let wal = await lsn();
  let cpu = cpuSeconds(pid);
  for (let n = 0; n < JOBS; n += ENQUEUE_BATCH) await db.query(layout.enqueue, [ENQUEUE_BATCH]);
  const enqueueMicros = ((cpuSeconds(pid) - cpu) / JOBS) * 1e6;
  const enqueueWal = Number((await lsn()) - wal) / JOBS;
  wal = await lsn();
  cpu = cpuSeconds(pid);
  let done = 0;
  for (;;) {
    const { rows } = await db.query<{ id: string; lease_token: string }>(layout.claim, [CLAIM_BATCH]);
    if (rows.length === 0) break;
    const written = await db.query(layout.complete, [rows.map((r) => r.id), rows.map((r) => r.lease_token)]);
    if (written.rowCount !== rows.length) throw new Error(`${layout.name}: ${written.rowCount} of ${rows.length} outcomes written`);
    done += rows.length;
  }
  if (done !== JOBS) throw new Error(`${layout.name}: ${done} of ${JOBS} jobs drained`);
  const drainMicros = ((cpuSeconds(pid) - cpu) / JOBS) * 1e6;
  const drainWal = Number((await lsn()) - wal) / JOBS;
  // The statistics of this backend reach the shared counters at the end of the next transaction.
  await db.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await db.query<{ upd: string; hot: string }>(
    `SELECT sum(n_tup_upd)::text AS upd, sum(n_tup_hot_upd)::text AS hot FROM pg_stat_user_tables WHERE schemaname = $1`,
    [layout.schema],
  );
  const upd = Number(rows[0]?.upd ?? 0);
  await db.query(`DROP SCHEMA ${layout.schema} CASCADE`);
  return { enqueueMicros, enqueueWal, drainMicros, drainWal, hotShare: upd > 0 ? Number(rows[0]?.hot ?? 0) / upd : 0 };
}

const median = (a: readonly number[]): number => summarize(a).median;

async function main(): Promise<void> {
  const db = new pg.Client({ connectionString: dsn, application_name: 'q-storage-layouts' });
  await db.connect();
  const all = layouts();
  const samples = new Map<string, Sample[]>(all.map((l) => [l.name, []]));
  try {
    await (await JobStore.open(dsn, { schema: TEMPLATE, maxConns: 1 })).close();
    const pid = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? 0;
    for (let r = 0; r < REPS; r++) {
      // Rotated, so drift of a shared machine hits every layout alike.
      const order = all.map((_, i) => all[(i + r) % all.length] as (typeof all)[number]);
      for (const layout of order) {
        const s = await runOnce(db, pid, layout);
        samples.get(layout.name)?.push(s);
        console.error(`round ${r + 1}/${REPS} ${layout.name}: ${s.drainMicros.toFixed(1)} µs/job claim+complete`);
      }
    }
    const baseName = samples.has('current') ? 'current' : (ONLY[0] ?? 'current');
    const baseline = samples.get(baseName) ?? [];
    const cur = median(baseline.map((s) => s.drainMicros));
    console.log(
      `| layout | enqueue, µs CPU / job | enqueue, WAL bytes / job | claim + complete, µs CPU / job | claim + complete, WAL bytes / job | ÷ ${baseName} | HOT updates |`,
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const [name, s] of samples) {
      const drain = median(s.map((x) => x.drainMicros));
      console.log(
        `| ${name} | ${median(s.map((x) => x.enqueueMicros)).toFixed(1)} | ${Math.round(median(s.map((x) => x.enqueueWal)))} | ${drain.toFixed(1)} | ${Math.round(median(s.map((x) => x.drainWal)))} | ${(drain / cur).toFixed(2)} | ${Math.round(median(s.map((x) => x.hotShare)) * 100)} % |`,
      );
    }
  } finally {
    for (const schema of [TEMPLATE, ...all.map((l) => l.schema)])
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
