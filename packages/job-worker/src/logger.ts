// The logger is shared by every q package; see @q/otel.
import { stderrLogger, type Logger } from '@q/otel';

export { errorFields, firstLine, logsAt, silentLogger, stderrLogger, type Logger } from '@q/otel';

let shared: Logger | undefined;

/**
 * The logger of a worker or job queue given none: warnings and errors (persistent failures, lost
 * leases, dead letters, a stopped worker) to stderr, one structured line each (readable on a
 * terminal); nothing for routine work. A failing worker is never silent by default; pass
 * `silentLogger` for no output at all.
 */
export function defaultLogger(): Logger {
  return (shared ??= stderrLogger({ name: 'q-jobs' }));
}
