// The dispatcher logs through @q/otel's `Logger` (pino's `(fields, msg)` call shape): one logger
// type for every q package and app, so a pino logger passes through as is.
export { silentLogger, type Logger } from '@q/otel';

/** A short, payload-free description of an error for log lines. */
export function errInfo(err: unknown): { err: string; code?: string } {
  const e = err as { message?: string; code?: unknown };
  return { err: e?.message ?? String(err), ...(typeof e?.code === 'string' ? { code: e.code } : {}) };
}
