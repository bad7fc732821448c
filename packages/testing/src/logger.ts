/** One line a {@link memoryLogger} kept. */
export interface LogLine {
  level: string;
  msg?: string;
  fields: Record<string, unknown>;
}

/** A pino-shaped logger that keeps every line, for tests that assert on what was logged. */
export interface MemoryLogger {
  lines: LogLine[];
  debug(fields: Record<string, unknown>, msg?: string): void;
  info(fields: Record<string, unknown>, msg?: string): void;
  warn(fields: Record<string, unknown>, msg?: string): void;
  error(fields: Record<string, unknown>, msg?: string): void;
}

/** A logger that records its lines in memory (`lines`), in order. */
export function memoryLogger(): MemoryLogger {
  const lines: LogLine[] = [];
  const at = (level: string) => (fields: Record<string, unknown>, msg?: string) => void lines.push({ level, msg, fields });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
