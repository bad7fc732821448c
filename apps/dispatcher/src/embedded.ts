// The embedded default: with no DSN configured, `run` and `demo` start a real PostgreSQL from npm
// with its data kept under `.q/` between runs. `run` records its DSN in `.q/dispatcher.json` so
// `submit`, `results`, `cancel` and `status` in another shell find it.
import fs from 'node:fs';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '@q/devdb';
import pg from 'pg';

/** Default data directory of the embedded server. */
export const DEFAULT_DATA_DIR = path.join('.q', 'pgdata');
const STATE_FILE = path.join('.q', 'dispatcher.json');

/** Starts (or reuses the data of) the embedded server. */
export function startEmbedded(dataDir = DEFAULT_DATA_DIR): Promise<EmbeddedPostgres> {
  return startEmbeddedPostgres({ dataDir: path.resolve(dataDir) });
}

/**
 * Recreates `schema` empty on the embedded server and returns a DSN that works in it: a demo's
 * data directory is kept between runs, the leftovers of an interrupted run are not.
 */
export async function freshSchema(embedded: EmbeddedPostgres, schema: string): Promise<string> {
  const admin = new pg.Client({ connectionString: embedded.dsn });
  admin.on('error', () => undefined); // a failure surfaces through the queries below
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await admin.end();
  }
  return withSearchPath(embedded.dsn, schema);
}

/** `dsn` with `search_path` set to `schema`. */
export function withSearchPath(dsn: string, schema: string): string {
  const u = new URL(dsn);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.toString();
}

/** Records the DSN of a running embedded dispatcher. */
export function writeRunState(dsn: string, pid = process.pid): void {
  fs.mkdirSync(path.dirname(STATE_FILE), { recursive: true });
  fs.writeFileSync(STATE_FILE, JSON.stringify({ dsn, pid }), { mode: 0o600 });
}

/** Removes the state file if it is ours. */
export function clearRunState(pid = process.pid): void {
  const s = readRunState();
  if (s && s.pid === pid) fs.rmSync(STATE_FILE, { force: true });
}

/** The DSN of a live embedded dispatcher started by `run`, if any. */
export function readRunState(): { dsn: string; pid: number } | undefined {
  try {
    const s = JSON.parse(fs.readFileSync(STATE_FILE, 'utf8')) as { dsn?: unknown; pid?: unknown };
    if (typeof s.dsn !== 'string' || typeof s.pid !== 'number') return undefined;
    process.kill(s.pid, 0); // throws when that process is gone
    return { dsn: s.dsn, pid: s.pid };
  } catch {
    return undefined;
  }
}
