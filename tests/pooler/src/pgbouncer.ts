// Starts Debian's PgBouncer in TRANSACTION mode in front of the test Postgres: what q must work
// through with `pooler: 'transaction'`. 1.18 (Debian 12) has no prepared-statement tracking, so
// a named statement sent twice on one client lands on whichever server connection is free.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** A running PgBouncer. */
export interface PgBouncer {
  /** `pgbouncer --version`'s first line, e.g. `PgBouncer 1.18.0`. */
  readonly version: string;
  readonly port: number;
  /** A DSN through the pooler for `user` (who must be in `users`) on the server's database. */
  dsn(user: string): string;
  /** Everything PgBouncer logged (for failure messages). */
  log(): string;
  stop(): Promise<void>;
}

/** A role PgBouncer lets in (trust towards the client; the password is what it uses towards the server). */
export interface PoolerUser {
  name: string;
  password?: string;
}

/** Options of {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** The server's URL (the test database). */
  serverUrl: string;
  users: PoolerUser[];
  /** Server connections per (database, user). Default 6 (the setting). */
  poolSize?: number;
}

/** The pgbouncer binary, or undefined when it is not installed. */
export function findPgBouncer(): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin', '/usr/bin']) {
    const p = path.join(dir, 'pgbouncer');
    if (dir && fs.existsSync(p)) return p;
  }
  return undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** Starts PgBouncer (pool_mode = transaction) and waits until it accepts connections. */
export async function startPgBouncer(opts: PgBouncerOptions): Promise<PgBouncer> {
  const bin = findPgBouncer();
  if (!bin) throw new Error('pgbouncer is not installed (Debian: apt-get install -y pgbouncer); .ci/run installs it');
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0]?.trim() ?? '';
  const server = new URL(opts.serverUrl);
  const db = decodeURIComponent(server.pathname.slice(1)) || 'postgres';
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'q-pgbouncer-'));
  const users = opts.users.map((u) => `${quote(u.name)} ${quote(u.password ?? '')}`).join('\n');
  fs.writeFileSync(path.join(dir, 'users.txt'), `${users}\n`);
  fs.writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${db} = host=${server.hostname} port=${server.port || 5432} dbname=${db}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${opts.poolSize ?? 6}`,
      'max_client_conn = 500',
      'ignore_startup_parameters = extra_float_digits',
      'server_reset_query =',
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  );
  fs.chmodSync(dir, 0o755);
  for (const f of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, f), 0o644);
  // PgBouncer refuses to run as root: drop to an unprivileged user then.
  const args = process.getuid?.() === 0 ? ['-u', 'nobody', path.join(dir, 'pgbouncer.ini')] : [path.join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout?.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const dsn = (user: string) => {
    const u = new URL(opts.serverUrl);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    u.username = user;
    u.password = '';
    u.search = '';
    return u.toString();
  };
  const first = opts.users[0]?.name;
  if (first === undefined) throw new Error('pgbouncer: at least one user is needed');
  const deadline = Date.now() + 15_000;
  for (;;) {
    const c = new pg.Client({ connectionString: dsn(first) });
    c.on('error', () => undefined);
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      break;
    } catch (err) {
      await c.end().catch(() => undefined);
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`pgbouncer did not start: ${(err as Error).message}\n${log}`, { cause: err });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    version,
    port,
    dsn,
    log: () => log,
    async stop() {
      child.kill('SIGINT');
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
