import { PARTITIONS } from './types.js';

const utf8 = new TextEncoder();

/**
 * The partition of a request id: 32-bit FNV-1a over the id's UTF-8 bytes, mod {@link PARTITIONS}.
 * Only the id counts (not the token), so every generation of a request lands in one partition.
 */
export function partitionOf(id: string): number {
  let h = 2166136261;
  for (const b of utf8.encode(id)) h = Math.imul(h ^ b, 16777619) >>> 0;
  return h % PARTITIONS;
}
