/** A pino-shaped logger writing JSON lines to stdout, so chaos runs keep everything processes say. */
export interface JsonLogger {
  debug(fields: Record<string, unknown>, msg?: string): void;
  info(fields: Record<string, unknown>, msg?: string): void;
  warn(fields: Record<string, unknown>, msg?: string): void;
  error(fields: Record<string, unknown>, msg?: string): void;
}

export function jsonLogger(name: string, level: 'debug' | 'info' = 'info'): JsonLogger {
  const write = (lvl: string) => (fields: Record<string, unknown>, msg?: string) => {
    process.stdout.write(`${JSON.stringify({ level: lvl, name, time: Date.now(), msg, ...fields })}\n`);
  };
  const noop = () => undefined;
  return { debug: level === 'debug' ? write('debug') : noop, info: write('info'), warn: write('warn'), error: write('error') };
}
