import { QError, QErrorCode, invalidArgument } from '@q/schema';
import type pg from 'pg';

/**
 * A connection the caller has put in a transaction (`BEGIN` … `COMMIT`): a `pg.PoolClient`, a
 * `pg.Client`, or any object with `pg`'s `query(config)` method (see {@link drizzleClient} for a
 * Drizzle transaction). q only runs its statements on it, inside a savepoint of its own: it never
 * commits, rolls back (beyond that savepoint) or keeps the client after the call.
 */
export interface TransactionClient {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/** The second argument of the `enqueue` methods that write through the caller's transaction. */
export interface InTransaction {
  /** The caller's connection, in its transaction: what is enqueued exists iff that transaction commits. */
  client: TransactionClient;
}

const SAVEPOINT = 'q_enqueue';
const NO_ACTIVE_TRANSACTION = '25P01';
const IN_FAILED_TRANSACTION = '25P02';

// q's statement sequences (savepoint … release) on one client must not interleave; calls on the
// same client run one after the other. The map holds no client once its calls are done.
const tails = new WeakMap<object, Promise<unknown>>();

/** Throws `INVALID_ARGUMENT` unless `opts` is `{ client }` with a `query` function. */
export function checkInTransaction(op: string, opts: unknown): TransactionClient {
  const client = (opts as { client?: unknown } | null)?.client;
  if (typeof opts !== 'object' || opts === null || !isQueryable(client)) {
    throw invalidArgument(`${op}: the second argument must be { client } with a pg client (or any object with query(config)) in a transaction`);
  }
  if (isPool(client)) throw invalidArgument(`${op}: client must be one connection in a transaction (pool.connect(), then BEGIN), not a pool`);
  return client;
}

// A pool runs each query on whichever connection is free: never "the caller's transaction".
function isPool(v: object): boolean {
  return typeof (v as { connect?: unknown }).connect === 'function' && 'totalCount' in v && 'idleCount' in v;
}

function isQueryable(v: unknown): v is TransactionClient {
  return typeof v === 'object' && v !== null && typeof (v as { query?: unknown }).query === 'function';
}

/**
 * Runs `fn` on the caller's `client` inside `SAVEPOINT q_enqueue`: released when `fn` resolves,
 * rolled back to (then released) when it throws, so a failed statement — a duplicate, a bad
 * value — leaves the caller's transaction usable. `fn`'s error is rethrown as it is (the caller
 * maps it to a `QError`). A client outside a transaction is `INVALID_ARGUMENT`; one whose
 * transaction is already aborted is `INVALID_STATE`; nothing is written in either case.
 */
export function inCallerTransaction<T>(op: string, client: TransactionClient, fn: () => Promise<T>): Promise<T> {
  const previous = tails.get(client) ?? Promise.resolve();
  const run = previous.then(
    () => savepointed(op, client, fn),
    () => savepointed(op, client, fn),
  );
  const tail = run.catch(() => undefined);
  tails.set(client, tail);
  void tail.then(() => {
    if (tails.get(client) === tail) tails.delete(client);
  });
  return run;
}

async function savepointed<T>(op: string, client: TransactionClient, fn: () => Promise<T>): Promise<T> {
  try {
    await client.query({ text: `SAVEPOINT ${SAVEPOINT}` });
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (code === NO_ACTIVE_TRANSACTION) {
      throw new QError(
        QErrorCode.INVALID_ARGUMENT,
        `${op}: the client is not in a transaction (BEGIN first; without { client } q uses its own pool)`,
        { cause: err },
      );
    }
    if (code === IN_FAILED_TRANSACTION) {
      throw new QError(QErrorCode.INVALID_STATE, `${op}: the caller's transaction is aborted (roll it back)`, { cause: err });
    }
    throw err;
  }
  let out: T;
  try {
    out = await fn();
  } catch (err) {
    // Undo q's part only; if even that fails the connection is gone and Postgres reports it next.
    try {
      await client.query({ text: `ROLLBACK TO SAVEPOINT ${SAVEPOINT}` });
      await client.query({ text: `RELEASE SAVEPOINT ${SAVEPOINT}` });
    } catch {
      /* the original error says more */
    }
    throw err;
  }
  await client.query({ text: `RELEASE SAVEPOINT ${SAVEPOINT}` });
  return out;
}

/**
 * The connection under a Drizzle `drizzle-orm/node-postgres` transaction, for q's `{ client }`:
 *
 * ```ts
 * await db.transaction(async (tx) => {
 *   await tx.insert(orders).values(order);
 *   await jobs.enqueue({ type: 'email', payload }, { client: drizzleClient(tx) });
 * });
 * ```
 *
 * Works for nested transactions (savepoints) too: they share the one connection. Anything else
 * (another Drizzle driver, a `db` outside a transaction) is `INVALID_ARGUMENT`.
 */
export function drizzleClient(tx: object): TransactionClient {
  // Drizzle's node-postgres session keeps the pg client it runs the transaction on in `client`.
  // Outside db.transaction that is the db's pool (refused here) or a plain client (refused by the
  // savepoint as not in a transaction).
  const client = (tx as { session?: { client?: unknown } } | null)?.session?.client;
  if (!isQueryable(client) || isPool(client)) {
    throw invalidArgument('drizzleClient: pass the tx of a drizzle-orm/node-postgres db.transaction(async (tx) => …) callback');
  }
  return client;
}
