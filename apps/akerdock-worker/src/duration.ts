import { invalidArgument } from '@q/schema';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a duration such as `250ms`, `5s`, `1m30s`, `30d` (Go-style, plus `d` for days) into
 * milliseconds. A bare integer is milliseconds. Throws `INVALID_ARGUMENT` naming `what`.
 */
export function parseDuration(text: string, what: string): number {
  const s = text.trim();
  if (/^\d+$/.test(s)) return Number(s);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let end = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    end = re.lastIndex;
  }
  if (s === '' || end !== s.length) {
    throw invalidArgument(`${what}: "${s}" is not a duration (examples: 250ms, 5s, 1m30s, 30d)`);
  }
  return Math.round(total);
}
