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

/** Whether `logger` writes anything at `level` (false for {@link silentLogger} and a {@link stderrLogger}'s quiet levels). */
export function logsAt(logger: Logger, level: keyof Logger): boolean {
  return logger[level] !== noop;
}

/** Options of {@link stderrLogger}. */
export interface StderrLoggerOptions {
  /** Written as `name` on each line (which q package speaks). */
  name: string;
  /** Human-readable lines instead of JSON. Default: when stderr is a terminal. */
  pretty?: boolean;
  /** Where lines go. Default: `process.stderr`. */
  write?: (line: string) => void;
}

const ANSI = { warn: '\u001b[33m', error: '\u001b[31m', dim: '\u001b[2m', reset: '\u001b[0m' } as const;

/**
 * A minimal default logger: `warn` and `error` lines (what needs a human: persistent failures,
 * lost leases, dead letters) to stderr, one line each — JSON (`level`, `time`, `name`, `msg`, then
 * the fields), or a readable line when stderr is a terminal — and nothing for `debug`/`info`
 * (routine work). Never throws: a line that cannot be written is dropped.
 */
export function stderrLogger(opts: StderrLoggerOptions): Logger {
  const write = opts.write ?? ((line: string) => void process.stderr.write(line));
  const pretty = opts.pretty ?? process.stderr.isTTY === true;
  const at =
    (level: 'warn' | 'error') =>
    (fields: Record<string, unknown>, msg?: string): void => {
      try {
        write(pretty ? prettyLine(level, opts.name, fields, msg) : jsonLine(level, opts.name, fields, msg));
      } catch {
        // A logger must not break the loop that logs (a closed stderr, an unserialisable field).
      }
    };
  return Object.freeze({ debug: noop, info: noop, warn: at('warn'), error: at('error') });
}

function jsonLine(level: string, name: string, fields: Record<string, unknown>, msg: string | undefined): string {
  return `${safeJson({ level, time: new Date().toISOString(), name, msg: msg ?? '', ...fields })}\n`;
}

function prettyLine(level: 'warn' | 'error', name: string, fields: Record<string, unknown>, msg: string | undefined): string {
  const time = new Date().toISOString().slice(11, 23);
  const rest = Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : safeJson(v)}`)
    .join(' ');
  return `${ANSI.dim}${time}${ANSI.reset} ${ANSI[level]}${level.toUpperCase()}${ANSI.reset} ${ANSI.dim}${name}${ANSI.reset} ${msg ?? ''}${rest ? ` ${ANSI.dim}${rest}${ANSI.reset}` : ''}\n`;
}

/** JSON of `v`, with bigints as strings and cycles cut: a log line must always be writable. */
function safeJson(v: unknown): string {
  const seen = new WeakSet<object>();
  return JSON.stringify(v, (_k, x: unknown) => {
    if (typeof x === 'bigint') return x.toString();
    if (typeof x === 'object' && x !== null) {
      if (seen.has(x)) return '[circular]';
      seen.add(x);
    }
    return x;
  });
}
