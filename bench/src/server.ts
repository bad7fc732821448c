import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { startEmbeddedPostgres } from '@q/devdb';
import { benchClient } from './pg.js';

/** The Postgres server a benchmark run talks to. */
export interface BenchServer {
  /** DSN of the server's maintenance database (CREATE DATABASE is issued through it). */
  readonly dsn: string;
  /** `DATABASE_URL` or `embedded`. */
  readonly kind: 'DATABASE_URL' | 'embedded';
  stop(): Promise<void>;
}

/**
 * `DATABASE_URL` when set; otherwise a fresh embedded PostgreSQL with its durable defaults
 * (fsync and synchronous_commit on — never the `fast` test mode), identical for every system.
 */
export async function openServer(databaseUrl: string | undefined, log: (line: string) => void): Promise<BenchServer> {
  if (databaseUrl) return { dsn: databaseUrl, kind: 'DATABASE_URL', stop: async () => undefined };
  log('starting the embedded PostgreSQL (durable settings)…');
  const server = await startEmbeddedPostgres({ settings: { max_connections: 400 } });
  return { dsn: server.dsn, kind: 'embedded', stop: () => server.stop() };
}

/** A throw-away database on the server, dropped by `drop()`. */
export interface FreshDatabase {
  readonly name: string;
  readonly dsn: string;
  /**
   * Waits up to `timeoutMs` for every connection to this database to close and returns those
   * still open then (empty when all closed). A closed `pg` pool only *starts* closing its
   * connections, so a backend may outlive `pool.end()` by a moment.
   */
  connectionsLeft(timeoutMs: number): Promise<OpenConnection[]>;
  drop(): Promise<void>;
}

/** A backend still connected to a run's database (from `pg_stat_activity`). */
export interface OpenConnection {
  pid: number;
  applicationName: string;
  state: string;
  query: string;
}

/** Creates an empty database, so every run starts from the same state (no bloat, no stats). */
export async function freshDatabase(serverDsn: string): Promise<FreshDatabase> {
  const name = `qbench_${process.pid}_${randomBytes(4).toString('hex')}`;
  await admin(serverDsn, `CREATE DATABASE ${name}`);
  const u = new URL(serverDsn);
  u.pathname = `/${name}`;
  return {
    name,
    dsn: u.toString(),
    connectionsLeft: (timeoutMs) => connectionsLeft(serverDsn, name, timeoutMs),
    drop: () => admin(serverDsn, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

// Only client connections count: an autovacuum worker busy in the run's database is the
// server's, not a connection the system under test left open (and DROP … WITH (FORCE) ends it).
async function connectionsLeft(serverDsn: string, database: string, timeoutMs: number): Promise<OpenConnection[]> {
  const c = benchClient(serverDsn, 'connection check');
  await c.connect();
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await c.query<{ pid: number; application_name: string; state: string | null; query: string }>(
        `SELECT pid, application_name, state, left(query, 120) AS query FROM pg_stat_activity
         WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend' ORDER BY pid`,
        [database],
      );
      if (r.rows.length === 0 || Date.now() >= deadline) {
        return r.rows.map((x) => ({ pid: x.pid, applicationName: x.application_name, state: x.state ?? 'unknown', query: x.query }));
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } finally {
    await c.end();
  }
}

async function admin(dsn: string, sql: string): Promise<void> {
  const c = benchClient(dsn, 'admin');
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** What the results were measured on: written next to every table. */
export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  platform: string;
  node: string;
  postgres: string;
  postgresSettings: Record<string, string>;
  server: 'DATABASE_URL' | 'embedded';
}

const SETTINGS = ['fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_connections', 'wal_level'];

/** Describes the machine and the Postgres server. */
export async function describeMachine(server: BenchServer): Promise<MachineInfo> {
  const c = benchClient(server.dsn, 'machine description');
  await c.connect();
  try {
    const v = await c.query<{ v: string }>('SELECT version() AS v');
    const s = await c.query<{ name: string; setting: string; unit: string | null }>(
      'SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1::text[])',
      [SETTINGS],
    );
    const postgresSettings: Record<string, string> = {};
    for (const r of s.rows) postgresSettings[r.name] = r.unit && r.unit !== '' ? `${r.setting} × ${r.unit}` : r.setting;
    return {
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
      platform: `${os.type()} ${os.release()} ${os.arch()}`,
      node: process.version,
      postgres: (v.rows[0]?.v ?? 'unknown').split(' on ')[0] ?? 'unknown',
      postgresSettings,
      server: server.kind,
    };
  } finally {
    await c.end();
  }
}
