import type pg from 'pg';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { createTestSchema, type TestSchema } from './schema.js';

/**
 * A store class as the kit sees it: `JobStore`, `Store` and `QuotaStore` all have this shape. The kit takes
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
 * Registers the lifecycle of one store per test file: in `beforeAll` a fresh schema and `Store.open(schema.dsn,
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

/** {@link useOpenStore} for `JobStore` from `@q/store` (schema prefix `jobs` unless given). */
export function useJobStore<S extends ClosableStore, O extends object>(
  jobStore: StoreClass<S, O>,
  opts: O & UseStoreKitOptions = {} as O & UseStoreKitOptions,
  onOpen?: (used: UsedStore<S>) => unknown,
): UsedStore<S> {
  return useOpenStore(jobStore, { prefix: 'jobs', ...opts }, onOpen);
}

/** {@link useOpenStore} for the request `Store` from `@q/store` (schema prefix `store` unless given). */
export function useStore<S extends ClosableStore, O extends object>(
  store: StoreClass<S, O>,
  opts: O & UseStoreKitOptions = {} as O & UseStoreKitOptions,
  onOpen?: (used: UsedStore<S>) => unknown,
): UsedStore<S> {
  return useOpenStore(store, { prefix: 'store', ...opts }, onOpen);
}

/** {@link useOpenStore} for `QuotaStore` from `@q/quota` (schema prefix `quota` unless given). */
export function useQuotaStore<S extends ClosableStore, O extends object>(
  quotaStore: StoreClass<S, O>,
  opts: O & UseStoreKitOptions = {} as O & UseStoreKitOptions,
  onOpen?: (used: UsedStore<S>) => unknown,
): UsedStore<S> {
  return useOpenStore(quotaStore, { prefix: 'quota', ...opts }, onOpen);
}
