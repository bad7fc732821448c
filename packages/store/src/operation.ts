// How both stores run one operation: the job store's `#op` and the request store's `#op` are this.
import type { Tracer } from '@opentelemetry/api';
import { withOperation } from '@q/otel';
import type { QError } from '@q/schema';
import { databaseError, type DatabaseErrorOptions } from '@q/schema/internal';

/** What a store tells {@link runOperation} about itself. */
export interface OperationOwner {
  readonly tracer: Tracer | undefined;
  /** The span name's prefix: `q.jobs` or `q.store` (spans are `<prefix>.<operation>`). */
  readonly spanPrefix: string;
  /** Whether `close()` has begun. */
  closed(): boolean;
  /** The store's `CLOSED` error. */
  closedError(): QError;
  /** What a unique violation means to this store (see `databaseError`). */
  readonly errors?: DatabaseErrorOptions;
}

/**
 * Runs `fn` as operation `name` of a store: traced (span `<spanPrefix>.<name>`), and every failure
 * a `QError` (see `databaseError`), the store's `CLOSED` error once it is closed (before the call,
 * or while the call was in flight).
 */
export function runOperation<T>(
  owner: OperationOwner,
  name: string,
  fn: () => Promise<T>,
  attributes?: Record<string, string | number | boolean>,
): Promise<T> {
  if (owner.closed()) return Promise.reject(owner.closedError());
  return withOperation(
    owner.tracer,
    `${owner.spanPrefix}.${name}`,
    async () => {
      try {
        return await fn();
      } catch (err) {
        throw owner.closed() ? owner.closedError() : databaseError(name, err, owner.errors);
      }
    },
    attributes,
  );
}
