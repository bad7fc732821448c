/**
 * The structured logger q writes to: the subset of pino's API it uses, so a pino logger (or any
 * logger with the same call shape) can be passed as is. Fields come first, the message second.
 */
export interface Logger {
  debug(fields: Record<string, unknown>, msg?: string): void;
  info(fields: Record<string, unknown>, msg?: string): void;
  warn(fields: Record<string, unknown>, msg?: string): void;
  error(fields: Record<string, unknown>, msg?: string): void;
}

const noop = (): void => undefined;

/** The default logger: writes nothing. */
export const silentLogger: Logger = Object.freeze({ debug: noop, info: noop, warn: noop, error: noop });

/**
 * Log fields describing an error without its message body beyond the first line: Postgres error
 * messages never carry values here (statements are parameterised), and q errors never carry a
 * payload or a DSN password.
 */
export function errorFields(err: unknown): Record<string, unknown> {
  if (err instanceof Error) {
    const code = (err as Error & { code?: unknown }).code;
    return { err: { name: err.name, message: err.message, ...(typeof code === 'string' ? { code } : {}) } };
  }
  return { err: { message: String(err) } };
}
