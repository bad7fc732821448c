import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_CONNS, PARTITIONS, keyOf, partitionOf, stampOf, type Request } from '../src/index.js';
import { idInPartition } from './requests/helpers.js';

describe('partitionOf', () => {
  it('matches the FNV-1a test vectors', () => {
    const vectors: Record<string, number> = {
      '': 5,
      a: 44,
      'request-42': 43,
      x: 7,
      orphan: 11,
      mid: 37,
      early: 28,
      late: 33,
      slow: 56,
      bounced: 27,
      twice: 51,
      flaky: 62,
    };
    for (const [id, p] of Object.entries(vectors)) expect(partitionOf(id), id).toBe(p);
  });

  it('finds the first ids of a partition like the idInPartition helper (docs/design/requests.md#partitioning)', () => {
    expect(idInPartition('busy', 7)).toBe('busy-217');
    expect(idInPartition('fresh', 60)).toBe('fresh-2');
    expect(idInPartition('fresh', 7)).toBe('fresh-32');
    expect(idInPartition('one', 1)).toBe('one-52');
    expect(idInPartition('two', 2)).toBe('two-11');
    expect(idInPartition('drain', 0)).toBe('drain-48');
    expect(idInPartition('old', 7)).toBe('old-42');
  });

  it('hashes UTF-8 bytes, not UTF-16 code units', () => {
    // 'é' is two UTF-8 bytes (0xc3 0xa9); hashing the code unit 0xe9 would give another value.
    let h = 2166136261;
    for (const b of [0xc3, 0xa9]) h = Math.imul(h ^ b, 16777619) >>> 0;
    expect(partitionOf('é')).toBe(h % 64);
  });

  it('spreads 64,000 ids evenly', () => {
    const counts = new Array<number>(PARTITIONS).fill(0);
    for (let i = 0; i < 64_000; i++) counts[partitionOf(`batch-${Math.floor(i / 100)}-line-${i}`)]!++;
    expect(Math.min(...counts)).toBe(942);
    expect(Math.max(...counts)).toBe(1055);
  });
});

describe('constants and helpers', () => {
  it('exports PARTITIONS and DEFAULT_MAX_CONNS (docs/design/api.md#request-queue-store)', () => {
    expect(PARTITIONS).toBe(64);
    expect(DEFAULT_MAX_CONNS).toBe(10);
  });

  it('keyOf and stampOf keep only their fields', () => {
    const r: Request = {
      id: 'i',
      token: 't',
      queue: 'q',
      deadline: 1,
      envelope: '{}',
      payload: new Uint8Array([1]),
      partition: 3,
      epoch: 2,
      attempt: 9,
      cancelled: false,
    };
    expect(keyOf(r)).toEqual({ id: 'i', token: 't' });
    expect(stampOf(r)).toEqual({ id: 'i', token: 't', attempt: 9 });
  });
});
