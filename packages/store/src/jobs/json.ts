// JSON text bound for jsonb columns. Postgres' jsonb refuses two things JSON.stringify emits:
// the escape \u0000 and escaped lone surrogates (\ud800…\udfff); a well-formed JS string pairs its
// surrogates, so such an escape is always a lone one. Only escapes preceded by an even number of
// backslashes are real escapes.
const UNSTORABLE = /(?<!\\)((?:\\\\)*)\\u(0000|d[89a-f][0-9a-f]{2})/gi;

/** `JSON.stringify(value)`, or `undefined` when it throws (BigInt, cycles) or yields nothing. */
export function tryStringify(value: unknown): string | undefined {
  try {
    const text = JSON.stringify(value);
    return typeof text === 'string' ? text : undefined;
  } catch {
    return undefined;
  }
}

/** True when jsonb can store `json` as is. */
export function isStorableJson(json: string): boolean {
  UNSTORABLE.lastIndex = 0;
  return !UNSTORABLE.test(json);
}

/** Replaces what jsonb cannot store by U+FFFD (for values q writes on the user's behalf). */
export function repairJson(json: string): string {
  return json.replace(UNSTORABLE, (_m, slashes: string) => `${slashes}\\ufffd`);
}

/** Text for a `text` column: NUL bytes are refused by Postgres and replaced. */
export function storableText(text: string): string {
  return text.includes('\0') ? text.replaceAll('\0', '\ufffd') : text;
}

/**
 * Why `value` cannot be a job payload, or `undefined` when it can: it must survive a JSON round
 * trip (no BigInt, function, symbol or cycle anywhere; no non-finite number). The reason never
 * quotes the payload, not even a key name.
 */
export function payloadProblem(value: unknown): string | undefined {
  const seen = new Set<object>();
  const walk = (v: unknown): string | undefined => {
    switch (typeof v) {
      case 'bigint':
        return 'payload contains a BigInt, which JSON cannot represent';
      case 'function':
        return 'payload contains a function, which JSON cannot represent';
      case 'symbol':
        return 'payload contains a symbol, which JSON cannot represent';
      case 'number':
        return Number.isFinite(v) ? undefined : 'payload contains a non-finite number, which JSON cannot represent';
      case 'object': {
        if (v === null) return undefined;
        if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return undefined; // Date, Buffer…
        if (seen.has(v)) return 'payload is circular, which JSON cannot represent';
        seen.add(v);
        const values = Array.isArray(v) ? v : Object.values(v);
        for (const x of values) {
          const p = x === undefined ? undefined : walk(x);
          if (p) return p;
        }
        seen.delete(v);
        return undefined;
      }
      default:
        return undefined;
    }
  };
  return walk(value);
}
