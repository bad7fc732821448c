import type { StoreConnectionOptions } from '@q/schema';
import type { FromPoolOptions, OpenOptions } from '../options.js';

/**
 * The job store's `schema` and `pooler` options.
 *
 * @deprecated Both fields are part of every store's options (`StoreConnectionOptions` of
 * `@q/schema`); name those instead. Kept so code that names this type still compiles.
 */
export type JobStoreSchemaOptions = Pick<StoreConnectionOptions, 'schema' | 'pooler'>;

/** Options of `JobStore.open`: every store's options (see `StoreOpenOptions` of `@q/schema`). */
export type JobStoreOpenOptions = OpenOptions;

/** Options of `JobStore.fromPool`: every store's options (see `StoreConnectionOptions` of `@q/schema`). */
export type JobStoreFromPoolOptions = FromPoolOptions;
