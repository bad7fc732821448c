import type { StoreConnectionOptions, StoreOpenOptions } from '@q/schema';

/** Options of `RequestStore.open` and `JobStore.open` (application name `q-store` / `q-jobs` unless given). */
export type OpenOptions = StoreOpenOptions;

/**
 * Options of `RequestStore.fromPool` and `JobStore.fromPool` (the pool's own settings stay as they are):
 * `migrate` applies the store's module through the pool (default `true`), `applicationName` names
 * the job store's LISTEN connections (default `q-jobs`).
 */
export type FromPoolOptions = StoreConnectionOptions & Pick<StoreOpenOptions, 'migrate' | 'applicationName'>;
