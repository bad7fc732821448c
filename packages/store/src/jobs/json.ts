// JSON text bound for jsonb columns. Postgres' jsonb refuses two things JSON.stringify emits:
// the escape \u0000 and escaped lone surrogates (\ud800…\udfff); a well-formed JS string pairs its
// surrogates, so such an escape is always a lone one. Only escapes preceded by an even number of
// backslashes are real escapes.
const UNSTORABLE = /(?<!\\)((?:\\\\)*)\\u(0000|d[89a-f][0-9a-f]{2})/gi;

/** Largest JSON value (payload, result, timeline) or error text accepted, in UTF-8 bytes. */
export const MAX_VALUE_BYTES = 64 * 1024 * 1024;

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
  // Both refused escapes start with \u, which JSON.stringify writes only for control characters
  // and lone surrogates: most texts have none, and a plain search is far cheaper than the pattern.
  if (!json.includes('\\u')) return true;
  UNSTORABLE.lastIndex = 0;
  return !UNSTORABLE.test(json);
}

/** Replaces what jsonb cannot store by U+FFFD (for values q writes on the user's behalf). */
export function repairJson(json: string): string {
  return json.replace(UNSTORABLE, (_m, slashes: string) => `${slashes}\\ufffd`);
}

/** UTF-8 size of `text` when it may be over `limit` bytes (only then is it measured). */
export function overLimit(text: string, limit = MAX_VALUE_BYTES): number | undefined {
  if (text.length <= limit / 3) return undefined;
  const bytes = Buffer.byteLength(text, 'utf8');
  return bytes > limit ? bytes : undefined;
}

/** The "N bytes, more than the 64 MiB …" part of a size error. */
export function sizeProblem(what: string, bytes: number): string {
  return `${what} is ${bytes} bytes, more than the ${MAX_VALUE_BYTES / 1024 / 1024} MiB a value may hold`;
}

// Objects JSON.stringify turns into something else without a word: a Map or Set becomes {}, a
// typed array an object of indices, an Error loses its message. (A Buffer or Date has toJSON,
// which runs first, so they never reach the check.)
const LOSSY: Array<[new (...args: never[]) => object, string]> = [
  [Map, 'a Map'],
  [Set, 'a Set'],
  [WeakMap, 'a WeakMap'],
  [WeakSet, 'a WeakSet'],
  [RegExp, 'a RegExp'],
  [Promise, 'a Promise'],
  [Error, 'an Error'],
  [ArrayBuffer, 'an ArrayBuffer'],
];

class JsonProblem extends Error {}

function lossyKind(v: object): string | undefined {
  if (ArrayBuffer.isView(v)) return 'a typed array';
  for (const [type, name] of LOSSY) if (v instanceof type) return name;
  if (typeof SharedArrayBuffer !== 'undefined' && v instanceof SharedArrayBuffer) return 'a SharedArrayBuffer';
  if (typeof WeakRef !== 'undefined' && v instanceof WeakRef) return 'a WeakRef';
  return undefined;
}

/** Deepest nesting the fast check walks; deeper values (or a cycle) take the replacer's path. */
const PLAIN_DEPTH = 32;

/**
 * Whether `v` is made only of what JSON.stringify writes unchanged in every mode: strings,
 * booleans, null, finite numbers, and arrays and plain objects (prototype `Object.prototype`,
 * `Array.prototype` or null, no `toJSON`) of those, at most {@link PLAIN_DEPTH} deep. False says
 * nothing is wrong, only that the replacer must look (it also tells `undefined` in an array or
 * an object, which JSON turns into null or leaves out, from what it refuses).
 */
function isPlainJson(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(v);
    case 'object': {
      if (v === null) return true;
      if (depth >= PLAIN_DEPTH) return false;
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto === Array.prototype) {
        const a = v as unknown[];
        for (let i = 0; i < a.length; i++) if (!isPlainJson(a[i], depth + 1)) return false;
        return true;
      }
      if (proto !== Object.prototype && proto !== null) return false;
      const o = v as Record<string, unknown>;
      if ('toJSON' in o) return false;
      for (const k in o) if (!isPlainJson(o[k], depth + 1)) return false;
      return true;
    }
    default:
      return false;
  }
}

/** How {@link jsonText} treats values JSON cannot carry at all. */
export type JsonMode =
  /** Job payloads: anything JSON cannot carry is a problem. */
  | 'strict'
  /**
   * Handler results: a value `JSON.stringify` refuses (BigInt, cycle, a throwing toJSON) or
   * omits (function, symbol, undefined) is stored as null, as documented; a value it would
   * silently turn into something else (Map, Set, NUL…) is a problem.
   */
  | 'result';

/** The replacer that names what JSON cannot carry as given (see {@link jsonText}); throws {@link JsonProblem}. */
function checkingReplacer(what: string, strict: boolean): (this: unknown, key: string, v: unknown) => unknown {
  return function (this: unknown, _key: string, v: unknown): unknown {
    switch (typeof v) {
      case 'bigint':
        if (strict) throw new JsonProblem(`${what} contains a BigInt, which JSON cannot represent`);
        return v;
      case 'function':
        if (strict) throw new JsonProblem(`${what} contains a function, which JSON cannot represent`);
        return v;
      case 'symbol':
        if (strict) throw new JsonProblem(`${what} contains a symbol, which JSON cannot represent`);
        return v;
      case 'number':
        if (strict && !Number.isFinite(v)) throw new JsonProblem(`${what} contains a non-finite number, which JSON cannot represent`);
        return v;
      case 'object': {
        const kind = v === null ? undefined : lossyKind(v);
        if (kind) throw new JsonProblem(`${what} contains ${kind}, which JSON cannot represent (it would be stored as something else)`);
        return v;
      }
      default:
        return v;
    }
  };
}

/**
 * The JSON text of `value` for a jsonb column, or `{ problem }` saying why it cannot be stored
 * as given (`what` names it). Rejects what JSON would change silently (Map, Set, typed arrays…;
 * in strict mode also BigInt, functions, symbols, non-finite numbers and cycles), `\u0000` and lone
 * surrogates (which jsonb refuses), a toJSON or getter that throws, and values over
 * {@link MAX_VALUE_BYTES}. The problem never quotes the value, not even a key name or the
 * message of what threw. `undefined` text means SQL NULL (result mode only).
 */
export function jsonText(value: unknown, what: string, mode: JsonMode): { text: string | null } | { problem: string } {
  const strict = mode === 'strict';
  let text: string | undefined;
  try {
    // Plain data (the common payload and result) is stringified without the replacer: a
    // replacer takes JSON.stringify off its fast path, and was most of an enqueue's own CPU.
    // Anything else goes through the replacer, which reports exactly what is wrong.
    text = (isPlainJson(value, 0) ? JSON.stringify(value) : JSON.stringify(value, checkingReplacer(what, strict))) as string | undefined;
  } catch (err) {
    if (err instanceof JsonProblem) return { problem: err.message };
    if (!strict) return { text: null };
    if (err instanceof TypeError && /circular/i.test(err.message)) return { problem: `${what} is circular, which JSON cannot represent` };
    return { problem: `${what} cannot be converted to JSON: a toJSON method or getter threw` };
  }
  if (typeof text !== 'string') {
    if (strict) return { problem: `${what} must be a JSON value` };
    return { text: null };
  }
  if (!isStorableJson(text)) {
    return { problem: `${what} contains \\u0000 or a lone surrogate, which Postgres jsonb cannot store` };
  }
  const bytes = overLimit(text);
  if (bytes !== undefined) return { problem: sizeProblem(what, bytes) };
  return { text };
}
