/**
 * The structured logger every q package writes to: the subset of pino's API q uses, so a pino
 * logger (or anything with the same call shape) can be passed as is. Fields first, message second.
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
 * Log fields of an error: name, first line of the message, and a Postgres/q code if any. q
 * messages never carry a DSN password or a payload, and statements are parameterised, so the first
 * line of a Postgres message holds no values.
 */
export function errorFields(err: unknown): Record<string, unknown> {
  if (err instanceof Error) {
    const code = (err as Error & { code?: unknown }).code;
    return { err: { name: err.name, message: firstLine(err.message), ...(typeof code === 'string' ? { code } : {}) } };
  }
  return { err: { message: firstLine(String(err)) } };
}

/** The first line of `text`. */
export function firstLine(text: string): string {
  const i = text.indexOf('\n');
  return i < 0 ? text : text.slice(0, i);
}
