import { quickTextCost, textCost } from './chunks.js';
import type { Key, Stamp } from './types.js';

/** Identity of a key inside one call (ids and tokens may contain any character). */
export function keyId(k: Key): string {
  return JSON.stringify([k.id, k.token]);
}

/** `u` as a `Buffer` without copying. */
export function toBuffer(u: Uint8Array): Buffer {
  return Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

/** Rendering bound of a text value for batch splitting: exact for large values, cheap for small ones. */
export function cost(s: string): number {
  return s.length > 1_000_000 ? textCost(s) : quickTextCost(s);
}

/** `stamps` without repeats of one (id, token, attempt), last one kept. */
export function distinctStamps(stamps: Stamp[]): Stamp[] {
  const seen = new Map<string, Stamp>();
  for (const s of stamps) seen.set(JSON.stringify([s.id, s.token, s.attempt]), s);
  return [...seen.values()];
}
