import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { createTestSchema, type TestSchema } from './schema.js';

/**
 * A store class as the kit sees it: `JobStore`, `RequestStore` and `QuotaStore` all have this shape. The kit takes
 * the class as an argument instead of importing it, so `@q/testing` does not depend on the packages whose
 * tests use it (that would be a cycle).
 */
export interface StoreClass<S, O> {
  open(dsn: string, opts?: O): Promise<S>;
}

/** What the kit needs of an open store. */
export interface ClosableStore {
  close(): Promise<void>;
  readonly pool?: pg.Pool;
}

/** Kit options of the `use…Store` helpers; every other key is passed to the store's `open`. */
export interface UseStoreKitOptions {
  /** Prefix of the schema name (`<prefix>_<random>`). */
  readonly prefix?: string;
  /** Tables emptied before each test (`TRUNCATE a, b`). */
  readonly truncate?: readonly string[];
}

/** The schema and the store of a `use…Store` helper, set once its `beforeAll` ran. */
export interface UsedStore<S> {
  readonly schema: TestSchema;
  readonly store: S;
}

/**
 * Registers the lifecycle of one store per test file: in `beforeAll` a fresh schema and `RequestStore.open(schema.dsn,
 * opts)`, then `onOpen` (assign your variables there); before each test the `truncate` tables are emptied; in
 * `afterAll` the store is closed and the schema dropped.
 */
export function useOpenStore<S extends ClosableStore, O extends object>(
  storeClass: StoreClass<S, O>,
  opts: O & UseStoreKitOptions = {} as O & UseStoreKitOptions,
  onOpen?: (used: UsedStore<S>) => unknown,
): UsedStore<S> {
  const { prefix = 'store', truncate, ...openOpts } = opts;
  let schema: TestSchema | undefined;
  let store: S | undefined;
  const used: UsedStore<S> = {
    get schema() {
      if (!schema) throw new Error('the test schema is created in beforeAll: read it inside a hook or a test');
      return schema;
    },
    get store() {
      if (!store) throw new Error('the store is opened in beforeAll: read it inside a hook or a test');
      return store;
    },
  };
  beforeAll(async () => {
    schema = await createTestSchema(prefix);
    store = await storeClass.open(schema.dsn, openOpts as O);
    await onOpen?.(used);
  });
  afterAll(async () => {
    await store?.close();
    await schema?.drop();
  });
  if (truncate && truncate.length > 0) {
    beforeEach(async () => {
      await (used.store.pool ?? used.schema.pool()).query(`TRUNCATE ${truncate.join(', ')}`);
    });
  }
  return used;
}

/** A {@link useOpenStore} whose schema prefix defaults to `prefix`. */
function withPrefix(prefix: string) {
  return <S extends ClosableStore, O extends object>(
    storeClass: StoreClass<S, O>,
    opts: O & UseStoreKitOptions = {} as O & UseStoreKitOptions,
    onOpen?: (used: UsedStore<S>) => unknown,
  ): UsedStore<S> => useOpenStore(storeClass, { prefix, ...opts }, onOpen);
}

/** {@link useOpenStore} for `JobStore` from `@q/store` (schema prefix `jobs` unless given). */
export const useJobStore = withPrefix('jobs');

/** {@link useOpenStore} for `RequestStore` from `@q/store` (schema prefix `store` unless given). */
export const useStore = withPrefix('store');

/** {@link useOpenStore} for `QuotaStore` from `@q/quota` (schema prefix `quota` unless given). */
export const useQuotaStore = withPrefix('quota');

/** A store class that can run on the caller's pool (`JobStore.fromPool`, `RequestStore.fromPool`). */
export interface PoolStoreClass<S> {
  fromPool(pool: pg.Pool): S | Promise<S>;
}

/** The schema, the application's pool and the store of {@link useFromPool}. */
export interface UsedPoolStore<S> extends UsedStore<S> {
  /** The application's own pool on the schema; the store runs on it. */
  readonly app: pg.Pool;
}

/**
 * Like {@link useOpenStore}, for a store on the application's pool: a fresh schema, `new pg.Pool({ max })`
 * on it (its `error` events ignored: tests terminate backends), `fromPool(app)`, then `onOpen`; `truncate`
 * runs on `app` before each test; `afterAll` closes the store, ends the pool and drops the schema.
 */
export function useFromPool<S extends ClosableStore>(
  storeClass: PoolStoreClass<S>,
  opts: UseStoreKitOptions & { readonly max?: number } = {},
  onOpen?: (used: UsedPoolStore<S>) => unknown,
): UsedPoolStore<S> {
  const { prefix = 'store', truncate, max = 10 } = opts;
  let schema: TestSchema | undefined;
  let app: pg.Pool | undefined;
  let store: S | undefined;
  const need = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new Error(`the ${what} is set up in beforeAll: read it inside a hook or a test`);
    return v;
  };
  const used: UsedPoolStore<S> = {
    get schema() {
      return need(schema, 'test schema');
    },
    get app() {
      return need(app, 'application pool');
    },
    get store() {
      return need(store, 'store');
    },
  };
  beforeAll(async () => {
    schema = await createTestSchema(prefix);
    app = new pg.Pool({ connectionString: schema.dsn, max });
    app.on('error', () => undefined);
    store = await storeClass.fromPool(app);
    await onOpen?.(used);
  });
  afterAll(async () => {
    await store?.close();
    await app?.end();
    await schema?.drop();
  });
  if (truncate && truncate.length > 0) {
    beforeEach(async () => {
      await used.app.query(`TRUNCATE ${truncate.join(', ')}`);
    });
  }
  return used;
}

/** A schema made for one test and a pool on it (see {@link useSchemaPerTest}). */
export interface SchemaAndPool {
  readonly schema: TestSchema;
  readonly pool: pg.Pool;
}

/** What {@link useSchemaPerTest} returns. */
export interface SchemaPerTest {
  /** A new schema `<prefix>_…` and a pool on it, both gone after the test. */
  fresh(): Promise<SchemaAndPool>;
  /** Pools ended after the test: `fresh()` adds its own; a test adds the others it opens. */
  readonly pools: pg.Pool[];
}

/**
 * For files whose every test wants an untouched schema (migration tests): `fresh()` creates a
 * schema and a pool of `max` connections on it; an `afterEach` ends the pools and drops the
 * schemas that test made.
 */
export function useSchemaPerTest(prefix: string, max: number): SchemaPerTest {
  const schemas: TestSchema[] = [];
  const pools: pg.Pool[] = [];
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.end()));
    await Promise.all(schemas.splice(0).map((s) => s.drop()));
  });
  return {
    pools,
    async fresh() {
      const schema = await createTestSchema(prefix);
      schemas.push(schema);
      const pool = new pg.Pool({ connectionString: schema.dsn, max });
      pools.push(pool);
      return { schema, pool };
    },
  };
}
