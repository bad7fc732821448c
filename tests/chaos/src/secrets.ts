import fs from 'node:fs';
import path from 'node:path';

/** Marker carried in every chaos payload: it must never show up in a log line. */
export const PAYLOAD_SECRET = 'PAYLOAD-SECRET-7f3a';
/** Password put in the DSNs the processes get (trust auth ignores it; it must never be printed). */
export const DSN_PASSWORD = 'chaos-pw-1c9e5b';

/**
 * The two halves of a password that holds an unescaped reserved character (`/`, `#`, `?`, a
 * blank…). Such a DSN does not parse as meant, so neither half may ever be printed: the
 * secret-grep looks for each.
 */
export const MALFORMED_PASSWORD_PARTS = ['mf7Qz', 'Wr2kV'] as const;

/**
 * DSNs whose password is `mf7Qz<c>Wr2kV` with an unescaped reserved character `<c>`: some do not
 * parse at all (`UNSUPPORTED_DSN`), others parse into other parts than meant and fail to connect
 * (`CONNECTION`, to 127.0.0.1:1 or localhost:1, so fast).
 */
export function malformedPasswordDsns(): string[] {
  const [a, b] = MALFORMED_PASSWORD_PARTS;
  return [
    `postgres://u:${a}/${b}@h/db`,
    `postgres://u:${a}#${b}@h/db`,
    `postgres://u:${a}?${b}@h/db`,
    `postgresql://u:${a}?${b}@h:5432/db?sslmode=disable`,
    // "1/…" reads as port 1 of host "localhost", the rest as path, query or fragment.
    `postgres://localhost:1/${a}#${b}@127.0.0.1/db`,
    `postgres://localhost:1/${a}?${b}@127.0.0.1/db`,
    `postgres://u:${a} ${b}@127.0.0.1:1/db`,
    // An unescaped "@" then "/": the password ends at the first "@", its rest is read as the host
    // (getaddrinfo ENOTFOUND …) or the database (database "…" does not exist).
    `postgres://u:${a}@${b}/x@127.0.0.1:1/db`,
    `postgres://u:${a}@127.0.0.1:1/${b}@h/db`,
  ];
}

/**
 * The "@ then /" shape aimed at a server that answers (`dsn`'s host and user): the server reads the
 * password's second half as the database name, and its error names it.
 */
export function databaseNamedByPassword(dsn: string): string {
  const [a, b] = MALFORMED_PASSWORD_PARTS;
  const url = new URL(dsn);
  return `postgres://${url.username || 'postgres'}:${a}@${url.host}/${b}@h/db`;
}

/** `dsn` with {@link DSN_PASSWORD} as its password. */
export function dsnWithPassword(dsn: string): string {
  const u = new URL(dsn);
  if (!u.username) u.username = 'postgres';
  u.password = DSN_PASSWORD;
  return u.toString();
}

/** Lines of the files under `dir` that contain a secret, as `file: line`. */
export function findSecrets(dir: string, secrets: string[] = [PAYLOAD_SECRET, DSN_PASSWORD, ...MALFORMED_PASSWORD_PARTS]): string[] {
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
