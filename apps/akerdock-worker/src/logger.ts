import pino from 'pino';

/** The pino-compatible subset the app logs through (a pino logger satisfies it). */
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

/**
 * The process logger: JSON lines on stdout (or `destination`), level from config. Secrets are
 * redacted by path as a second line of defence; the app never logs payloads in the first place.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): pino.Logger {
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
export const silentLogger: Logger = pino({ level: 'silent' });
