import { invalidArgument, type StoreConnectionOptions } from '@q/schema';
import { checkOptionsObject, checkProviders } from '@q/schema/internal';
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

/**
 * Checks the shape of `JobStore.open`/`fromPool` options before anything is opened: an object,
 * telemetry providers with `getTracer()`/`getMeter()`, a boolean `migrate` (the rest is checked by
 * `checkPlacement` and the schema check).
 */
export function checkJobStoreOptions(op: string, opts: unknown): asserts opts is JobStoreOpenOptions {
  checkOptionsObject(op, opts);
  const o = opts as JobStoreOpenOptions;
  checkProviders(op, o);
  if (o.migrate !== undefined && typeof o.migrate !== 'boolean') throw invalidArgument(`${op}: migrate must be a boolean`);
}
