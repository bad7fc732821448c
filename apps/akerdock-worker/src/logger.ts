import pino from 'pino';
import pinoPretty from 'pino-pretty';
import type { Logger } from '@q/otel';
import type { LogFormat } from './config.js';

export type { Logger } from '@q/otel';

/**
 * A logger whose lines carry `bindings` too: pino's own `child` when the logger has one, else a
 * wrapper merging them into each line's fields (any {@link Logger} may be passed to the app).
 */
export function childLogger(log: Logger, bindings: Record<string, unknown>): Logger {
  const withChild = log as Logger & { child?: (b: Record<string, unknown>) => Logger };
  if (typeof withChild.child === 'function') return withChild.child(bindings);
  return {
    debug: (fields, msg) => log.debug({ ...bindings, ...fields }, msg),
    info: (fields, msg) => log.info({ ...bindings, ...fields }, msg),
    warn: (fields, msg) => log.warn({ ...bindings, ...fields }, msg),
    error: (fields, msg) => log.error({ ...bindings, ...fields }, msg),
  };
}

/** How the process logger writes its lines. */
export interface LoggerOptions {
  /** Where lines go. Default: stdout. */
  destination?: pino.DestinationStream;
  /**
   * `pretty`: coloured human lines with local times; `json`: pino JSON lines (epoch-ms `time`);
   * `auto` (default): pretty when stdout is a terminal, JSON otherwise (a pipe, a file, a log shipper).
   */
  format?: LogFormat;
  /** Whether stdout is a terminal (the `auto` decision). Default: `process.stdout.isTTY`. */
  isTTY?: boolean;
}

/**
 * Decides between human and JSON lines: a person reading a terminal gets pretty lines, anything
 * reading a pipe or file (collectors, `jq`, tests) keeps machine-readable JSON.
 */
export function usePrettyLogs(format: LogFormat, isTTY: boolean): boolean {
  return format === 'pretty' || (format === 'auto' && isTTY);
}

/**
 * The process logger, level from config. Secrets are redacted by path as a second line of
 * defence (before either format renders); the app never logs payloads in the first place.
 * The second argument may be a destination stream (the JSON format, for tests) or options.
 */
export function createLogger(level: string, destinationOrOptions?: pino.DestinationStream | LoggerOptions): pino.Logger {
  const opts: LoggerOptions =
    destinationOrOptions === undefined || 'write' in destinationOrOptions
      ? { destination: destinationOrOptions as pino.DestinationStream | undefined, format: 'json' }
      : destinationOrOptions;
  const isTTY = opts.isTTY ?? process.stdout.isTTY === true;
  const pretty = usePrettyLogs(opts.format ?? 'auto', isTTY);
  const destination = pretty
    ? pinoPretty({
        // Synchronous, in this thread: no worker transport, nothing lost on process.exit.
        sync: true,
        // Colours only for a terminal, and never against the NO_COLOR convention.
        colorize: isTTY && !process.env.NO_COLOR,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname,service',
        destination: opts.destination ?? 1,
      })
    : opts.destination;
  return pino(
    {
      level,
      base: { service: 'akerdock-worker', pid: process.pid },
      redact: { paths: ['dsn', 'token', 'adminToken', 'webhookSecret', 'headers.authorization'], censor: '[redacted]' },
    },
    destination,
  );
}

/** A logger that drops everything (library default). */
export { silentLogger } from '@q/otel';
