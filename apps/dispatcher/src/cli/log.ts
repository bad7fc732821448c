// The `run` command's process logger: human lines for a person at a terminal, JSON lines for
// anything else (a pipe, a file, a log shipper, `jq`).
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import pinoPretty from 'pino-pretty';

/** `--log-format`: `auto` decides by whether the log stream is a terminal. */
export type LogFormat = 'auto' | 'pretty' | 'json';

/** The accepted `--log-format` values. */
export const LOG_FORMATS: readonly LogFormat[] = ['auto', 'pretty', 'json'];

/** The accepted `--log-level` values (pino's levels). */
export const LOG_LEVELS: readonly string[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Options of {@link createCliLogger}. */
export interface CliLoggerOptions {
  level: string;
  format: LogFormat;
  /** Whether the log stream is a terminal (the `auto` decision). */
  isTTY: boolean;
  /** Where lines go (tests); default stderr (stdout stays free for command output). */
  destination?: DestinationStream;
}

/** True when lines should be human-readable: forced, or `auto` on a terminal. */
export function usePrettyLogs(format: LogFormat, isTTY: boolean): boolean {
  return format === 'pretty' || (format === 'auto' && isTTY);
}

/** The process logger of `q-dispatcher run`. DSN passwords never reach it (they are redacted before). */
export function createCliLogger(opts: CliLoggerOptions): PinoLogger {
  const destination = usePrettyLogs(opts.format, opts.isTTY)
    ? pinoPretty({
        // Synchronous, in this thread: nothing is lost when the process exits right after a line.
        sync: true,
        colorize: opts.isTTY && !process.env.NO_COLOR,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname,svc',
        destination: opts.destination ?? 2,
      })
    : // Synchronous too: the last line before an exit (the cause of a failure) stays the last line.
      (opts.destination ?? pino.destination({ dest: 2, sync: true }));
  return pino({ level: opts.level, base: { svc: 'q-dispatcher', pid: process.pid } }, destination);
}
