import type { RequestMetrics } from '@q/otel';
import type { StatementScope } from '@q/schema/internal';
import type pg from 'pg';

/** Span attributes of one store operation. */
export type Attrs = Record<string, string | number | boolean>;

/**
 * What an operation module of the store needs from it: the pool, the statement scope, its
 * metrics, and `op`, which runs one operation in its span and turns failures into `QError`s
 * (`CLOSED` once the store is closed).
 */
export interface StoreContext {
  readonly pool: pg.Pool;
  readonly scope: StatementScope;
  readonly metrics: RequestMetrics;
  op<T>(name: string, attrs: Attrs | undefined, fn: () => Promise<T>): Promise<T>;
}
