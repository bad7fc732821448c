#!/usr/bin/env node
// akerdock-worker: consumes the job queues, runs the handlers and serves the admin API.
// SIGTERM/SIGINT drain gracefully (AKERDOCK_SHUTDOWN_TIMEOUT); a second signal exits at once.
import { isQError, redactDsn } from '@q/schema';
import { startWorkerApp } from '../app.js';
import { USAGE, parseConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { VERSION } from '../version.js';

/**
 * Exit status 2 is for what the operator must change before a restart can help (flags, config, a
 * database of another q version); everything else is 1 (docs/deployment.md#exit-codes).
 */
function isConfigError(err: unknown): boolean {
  return isQError(err) && ['CONFIG', 'INVALID_ARGUMENT', 'UNSUPPORTED_DSN', 'SCHEMA_MISMATCH'].includes(err.code);
}

let parsed;
try {
  parsed = parseConfig(process.argv.slice(2), process.env);
} catch (err) {
  if (!isQError(err, 'CONFIG')) throw err;
  process.stderr.write(`akerdock-worker: ${err.message}\n\n${USAGE}\n`);
  process.exit(2);
}
if (parsed.help) {
  process.stdout.write(parsed.version ? `akerdock-worker ${VERSION}\n` : `${USAGE}\n`);
  process.exit(0);
}
const config = parsed.config;
const log = createLogger(config.logLevel, { format: config.logFormat });

let app: Awaited<ReturnType<typeof startWorkerApp>> | undefined;
let signals = 0;
const onSignal = (signal: NodeJS.Signals) => {
  signals += 1;
  if (signals > 1 || !app) {
    log.warn({ signal }, 'second signal: exiting without draining');
    process.exit(1);
  }
  log.info({ signal }, 'shutting down');
  app.stop().then(
    () => {
      log.info({}, 'stopped');
      process.exit(0);
    },
    (err: unknown) => {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
};
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);

try {
  app = await startWorkerApp(config, { logger: log });
} catch (err) {
  // One line on stderr, the cause once; its stack only when the log level asks for detail.
  const verbose = config.logLevel === 'debug' || config.logLevel === 'trace';
  const e = err instanceof Error ? err : new Error(String(err));
  process.stderr.write(`akerdock-worker: could not start: ${redactDsn(verbose ? (e.stack ?? e.message) : e.message)}\n`);
  process.exit(isConfigError(err) ? 2 : 1);
}
