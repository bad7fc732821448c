import fs from 'node:fs';
import path from 'node:path';

/** Marker carried in every chaos payload: it must never show up in a log line. */
export const PAYLOAD_SECRET = 'PAYLOAD-SECRET-7f3a';
/** Password put in the DSNs the processes get (trust auth ignores it; it must never be printed). */
export const DSN_PASSWORD = 'chaos-pw-1c9e5b';

/** `dsn` with {@link DSN_PASSWORD} as its password. */
export function dsnWithPassword(dsn: string): string {
  const u = new URL(dsn);
  if (!u.username) u.username = 'postgres';
  u.password = DSN_PASSWORD;
  return u.toString();
}

/** Lines of the files under `dir` that contain a secret, as `file: line`. */
export function findSecrets(dir: string, secrets: string[] = [PAYLOAD_SECRET, DSN_PASSWORD]): string[] {
  const hits: string[] = [];
  for (const f of fs.readdirSync(dir, { recursive: true }) as string[]) {
    const file = path.join(dir, f);
    if (!fs.statSync(file).isFile()) continue;
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (secrets.some((s) => line.includes(s))) hits.push(`${f}: ${line.slice(0, 300)}`);
    }
  }
  return hits;
}
