// A pino-compatible logger interface (pino's `(obj, msg)` call shape); silent by default.

/** The subset of pino the dispatcher calls. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const noop = () => undefined;

/** Logs nothing. */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };

/** A short, payload-free description of an error for log lines. */
export function errInfo(err: unknown): { err: string; code?: string } {
  const e = err as { message?: string; code?: unknown };
  return { err: e?.message ?? String(err), ...(typeof e?.code === 'string' ? { code: e.code } : {}) };
}
