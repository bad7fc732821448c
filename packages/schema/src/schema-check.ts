import { onlyRow } from './arrays.js';
import type pg from 'pg';
import { QError, QErrorCode } from './errors.js';

/** Oldest PostgreSQL q supports, as `server_version_num` (13.0). 12 lacks what the migrations use. */
export const MIN_SERVER_VERSION_NUM = 130_000;

/**
 * Refuses a server older than PostgreSQL 13 (`server_version_num` below 130000) with a `CONFIG`
 * `QError` naming both versions. 12 fails in the middle of the migrations (`gen_random_uuid()`
 * is 13+, so are the insert-autovacuum storage parameters): refusing up front leaves nothing
 * half-applied.
 */
export function checkServerVersion(versionNum: number): void {
  if (!Number.isInteger(versionNum) || versionNum <= 0) {
    throw new QError(QErrorCode.CONFIG, `migrate: cannot read the server version (server_version_num = ${String(versionNum)})`);
  }
  if (versionNum < MIN_SERVER_VERSION_NUM) {
    throw new QError(QErrorCode.CONFIG, `migrate: PostgreSQL ${versionText(versionNum)} is not supported: q needs PostgreSQL 13 or later`);
  }
}

/** `120017` → `12.17`; `90624` → `9.6.24`. */
function versionText(n: number): string {
  if (n >= 100_000) return `${Math.floor(n / 10_000)}.${n % 10_000}`;
  return `${Math.floor(n / 10_000)}.${Math.floor(n / 100) % 100}.${n % 100}`;
}

/** What the session resolved, read once by `migrate` (one round trip). */
export interface SessionFacts {
  versionNum: number;
  currentSchema: string | null;
  searchPath: string;
}

/** Reads {@link SessionFacts} on `client`. */
export async function readSession(client: pg.ClientBase): Promise<SessionFacts> {
  const { rows } = await client.query<{ v: string; schema: string | null; path: string }>(
    `SELECT current_setting('server_version_num') AS v, current_schema() AS schema, current_setting('search_path') AS path`,
  );
  const r = onlyRow(rows, 'schema check');
  return { versionNum: Number(r.v), currentSchema: r.schema, searchPath: r.path };
}

/** The entries of a `search_path` setting, unquoted, in order. */
export function searchPathEntries(path: string): string[] {
  const out: string[] = [];
  const re = /\s*(?:"((?:[^"]|"")*)"|([^,\s]+))\s*(?:,|$)/gy;
  let m: RegExpExecArray | null;
  while (re.lastIndex < path.length && (m = re.exec(path)) !== null) {
    if (m[1] !== undefined) out.push(m[1].replaceAll('""', '"'));
    else if (m[2] !== undefined) out.push(m[2].toLowerCase());
    if (m[0] === '') break;
  }
  return out;
}

/** The `search_path` a pool's connections ask for in their startup `options` (`-c search_path=…`), if any. */
export function requestedSearchPath(pool: pg.Pool): string | undefined {
  const config = (pool as { options?: { options?: unknown; connectionString?: unknown } }).options;
  let options = config?.options;
  if (typeof options !== 'string' && typeof config?.connectionString === 'string') {
    try {
      options = new URL(config.connectionString).searchParams.get('options') ?? undefined;
    } catch {
      options = undefined; // a key=value DSN: no startup options q can read
    }
  }
  if (typeof options !== 'string') return undefined;
  const m = /(?:^|\s)(?:-c\s*|--)search_path=((?:\\ |[^\s])+)/.exec(options);
  return m?.[1]?.replaceAll('\\ ', ' ');
}

/**
 * Names the real cause when the schema `migrate` would use is not the one the connection asked
 * for, instead of migrating silently into another schema (`public`): a startup option a pooler
 * dropped, a first `search_path` schema that does not exist, or one this role has no USAGE on
 * (Postgres skips both while resolving `current_schema()`). Throws `SCHEMA_MISMATCH`.
 */
export async function checkResolvedSchema(client: pg.ClientBase, pool: pg.Pool, facts: SessionFacts): Promise<string> {
  const requested = requestedSearchPath(pool);
  if (requested !== undefined) {
    const want = searchPathEntries(requested)[0];
    const have = searchPathEntries(facts.searchPath)[0];
    if (want !== undefined && want !== have) {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        `migrate: the connection asked for search_path "${requested}" (DSN options) but the session has "${facts.searchPath}": ` +
          'a pooler dropped the startup option; use the schema option or ALTER ROLE … SET search_path',
      );
    }
  }
  const first = await firstNamedSchema(client, searchPathEntries(facts.searchPath));
  if (first !== undefined && first !== facts.currentSchema) {
    const { rows } = await client.query<{ present: boolean; usage: boolean | null }>(
      `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS present,
              (SELECT has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = $1) AS usage`,
      [first],
    );
    const resolved = facts.currentSchema === null ? 'no schema' : `"${facts.currentSchema}"`;
    if (!rows[0]?.present) {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        `migrate: the first schema in search_path, "${first}", does not exist (the session resolved to ${resolved} instead): create it or pass the schema option`,
      );
    }
    if (rows[0].usage === false) {
      throw new QError(
        QErrorCode.SCHEMA_MISMATCH,
        `migrate: this role has no USAGE on schema "${first}", the first in search_path (the session resolved to ${resolved} instead): GRANT USAGE, CREATE ON SCHEMA "${first}"`,
      );
    }
  }
  if (!facts.currentSchema) {
    throw new QError(QErrorCode.SCHEMA_MISMATCH, 'migrate: no current schema: the first schema in search_path does not exist');
  }
  return facts.currentSchema;
}

/** The first entry of a search_path that names a schema, skipping `$user` when no schema of the role's name exists. */
async function firstNamedSchema(client: pg.ClientBase, entries: string[]): Promise<string | undefined> {
  for (const e of entries) {
    if (e === 'pg_catalog' || e === 'pg_temp' || e.startsWith('pg_temp_')) continue;
    if (e !== '$user') return e;
    const { rows } = await client.query<{ name: string | null }>(
      'SELECT (SELECT nspname FROM pg_namespace WHERE nspname = current_user) AS name',
    );
    if (rows[0]?.name) return rows[0].name;
  }
  return undefined;
}

/**
 * Checks that this role can use (and, with migrations pending, create in) the schema it was asked
 * to migrate into, naming the missing grant instead of a later, vaguer failure. Throws `SCHEMA_MISMATCH`.
 */
export async function checkSchemaGrants(client: pg.ClientBase, schema: string, needCreate: boolean): Promise<void> {
  const { rows } = await client.query<{ usage: boolean | null; create: boolean | null }>(
    `SELECT has_schema_privilege(oid, 'USAGE') AS usage, has_schema_privilege(oid, 'CREATE') AS create
       FROM pg_namespace WHERE nspname = $1`,
    [schema],
  );
  const r = rows[0];
  if (!r) return; // missing: ensureSchema creates it (or says why it cannot)
  if (r.usage === false) {
    throw new QError(
      QErrorCode.SCHEMA_MISMATCH,
      `migrate: this role has no USAGE on schema "${schema}": GRANT USAGE ON SCHEMA "${schema}" (and CREATE to migrate)`,
    );
  }
  if (needCreate && r.create === false) {
    throw new QError(
      QErrorCode.SCHEMA_MISMATCH,
      `migrate: this role has no CREATE on schema "${schema}", and migrations are pending: GRANT CREATE ON SCHEMA "${schema}" or migrate with a role that has it`,
    );
  }
}
