import { createHash } from 'node:crypto';
import type pg from 'pg';
import { checkName } from './text.js';
import { invalidArgument } from './errors.js';

// Every SQL statement of q is a constant: a name (`q_<package>_<operation>`) and a text whose
// table and function names are written `__q_schema__.<name>`. A store binds the statements to the
// schema it was opened on (`schema` option, or the connection's current schema at open) once, so
// no statement depends on the session's `search_path`: that is what lets one pool serve stores of
// two schemas, a caller's client with any `search_path` enqueue into the right table, and a
// transaction pooler (which keeps no session settings) run the same text. Bound names carry a
// short hash of the schema, because a prepared statement's name is per connection and one pooled
// connection may run the statements of two schemas. In `named: false` mode (PgBouncer in
// transaction mode without prepared-statement tracking) statements go out unnamed: parsed again
// on every call, at a cost of a few per cent of a hot path, but never tied to one server session.

/** The placeholder schema prefix of statement texts, replaced by the bound schema's identifier. */
export const SCHEMA_TOKEN = '__q_schema__';

/** What statements run on: a pool (one round trip) or one checked-out client (in a transaction). */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/** A named, parameterised statement; `text` writes schema objects as `__q_schema__.<name>`. */
export interface Statement {
  readonly name: string;
  readonly text: string;
  /** How its result columns are parsed, when not `pg`'s defaults (e.g. `repeatedTimestamps`). */
  readonly types?: pg.CustomTypesConfig;
  /** `array`: each row arrives as an array of its values in column order (see {@link StatementOptions}). */
  readonly rowMode?: 'array';
}

/** Options of {@link statement}. */
export interface StatementOptions {
  /** Result parsing of the statement (default: `pg`'s); see `repeatedTimestamps`. */
  types?: pg.CustomTypesConfig;
  /**
   * `array`: rows as arrays of values in column order, for a hot statement whose rows are mapped
   * by position anyway: `pg` then fills an array per row instead of an object keyed by column
   * name, about a third less of its parsing per row of thirty columns.
   */
  rowMode?: 'array';
}

/** Declares a statement. `name` must start with `q_`; checked once, at module load. */
export function statement(name: string, text: string, opts: StatementOptions = {}): Statement {
  if (!/^q_[a-z0-9_]+$/.test(name) || name.length > 50) {
    throw new Error(`statement name "${name}" must match q_[a-z0-9_]+ and have at most 50 characters`);
  }
  return Object.freeze({ name, text, ...(opts.types ? { types: opts.types } : {}), ...(opts.rowMode ? { rowMode: opts.rowMode } : {}) });
}

/** Options of {@link StatementScope}. */
export interface StatementScopeOptions {
  /** Send statements unnamed (no server-side prepared statement): for transaction poolers. Default true (named). */
  named?: boolean;
}

/** Quotes `name` as an SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Statements bound to one schema (and one naming mode). Bound texts and names are computed once
 * per statement and cached; `run` is the only way q's packages execute a statement.
 */
export class StatementScope {
  /** The schema every statement of this scope reads and writes. */
  readonly schema: string;
  /** Whether statements are sent as named (prepared once per connection). */
  readonly named: boolean;
  readonly #prefix: string;
  readonly #suffix: string;
  readonly #bound = new Map<Statement, Statement>();

  constructor(schema: string, opts: StatementScopeOptions = {}) {
    checkSchemaName('StatementScope', schema);
    this.schema = schema;
    this.named = opts.named !== false;
    this.#prefix = `${quoteIdent(schema)}.`;
    this.#suffix = `_${createHash('sha1').update(schema).digest('hex').slice(0, 8)}`;
  }

  /**
   * `text` with every `__q_schema__.` replaced by this scope's quoted schema. One that opens a
   * string literal (`'__q_schema__.q_jobs_id_seq'::regclass`) gets the schema with its single
   * quotes doubled as well, so a schema named `o'hara` still closes the literal where it should.
   */
  sql(text: string): string {
    return text
      .split(`'${SCHEMA_TOKEN}.`)
      .map((part) => part.split(`${SCHEMA_TOKEN}.`).join(this.#prefix))
      .join(`'${this.#prefix.replace(/'/g, "''")}`);
  }

  /** `stmt` bound to this scope: text qualified, name suffixed with the schema's hash. */
  bind(stmt: Statement): Statement {
    let b = this.#bound.get(stmt);
    if (!b) {
      b = {
        name: `${stmt.name}${this.#suffix}`,
        text: this.sql(stmt.text),
        ...(stmt.types ? { types: stmt.types } : {}),
        ...(stmt.rowMode ? { rowMode: stmt.rowMode } : {}),
      };
      this.#bound.set(stmt, b);
    }
    return b;
  }

  /** The `pg` query config of `stmt` with `values`. */
  config(stmt: Statement, values: unknown[]): pg.QueryConfig {
    const b = this.bind(stmt);
    const config: pg.QueryConfig = this.named ? { name: b.name, text: b.text, values } : { text: b.text, values };
    if (b.types) config.types = b.types;
    // pg's QueryConfig type leaves `rowMode` to QueryArrayConfig; the driver reads it from either.
    if (b.rowMode) Object.assign(config, { rowMode: b.rowMode });
    return config;
  }

  /** Runs `stmt` with `values` on `db`. */
  run<R extends pg.QueryResultRow = pg.QueryResultRow>(db: Queryable, stmt: Statement, values: unknown[]): Promise<pg.QueryResult<R>> {
    return db.query<R>(this.config(stmt, values));
  }
}

/** Longest schema name Postgres keeps (NAMEDATALEN − 1 bytes). */
export const MAX_SCHEMA_BYTES = 63;

/** Checks a `schema` option: a non-empty storable string of at most 63 bytes. Throws `INVALID_ARGUMENT`. */
export function checkSchemaName(op: string, schema: unknown): string {
  const s = checkName(op, 'schema', schema);
  if (Buffer.byteLength(s, 'utf8') > MAX_SCHEMA_BYTES) {
    throw invalidArgument(`${op}: schema is longer than ${MAX_SCHEMA_BYTES} bytes (Postgres would truncate it)`);
  }
  return s;
}
