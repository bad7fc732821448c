import { QError, QErrorCode, isQError } from '@q/schema';

/**
 * Combines the errors of independent steps into one: `undefined` for none, the error itself for
 * one, otherwise a `QError` (code of the first `QError`, else `CONNECTION`) whose `cause` is an
 * `AggregateError` of them all.
 */
export function joinErrors(errors: unknown[], what: string): unknown {
  if (errors.length === 0) return undefined;
  if (errors.length === 1) return errors[0];
  const first = errors.find((e) => isQError(e));
  const code = first && isQError(first) ? first.code : QErrorCode.CONNECTION;
  const msg = errors.map((e) => (e instanceof Error ? e.message : String(e))).join('; ');
  return new QError(code, `${what}: ${errors.length} steps failed: ${msg}`, { cause: new AggregateError(errors) });
}
