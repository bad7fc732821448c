import fc from 'fast-check';
import { expect, it } from 'vitest';
import { LEASE_DURATION_MS, RETRY_CAP_MS, retryBackoffMs } from '../src/index.js';

const SIX_MIN = 6 * 60_000;

it('attempts 1–6 stay within [0.8, 1.2) × 5 s·2^(attempt−1), all under 6 min, and grow', () => {
  for (let attempt = 1; attempt <= 6; attempt++) {
    const base = 5_000 * 2 ** (attempt - 1);
    for (let i = 0; i < 200; i++) {
      const d = retryBackoffMs(attempt);
      expect(d).toBeGreaterThanOrEqual(0.8 * base);
      expect(d).toBeLessThan(1.2 * base);
      expect(d).toBeLessThan(SIX_MIN);
    }
  }
  // Growth: the lowest delay of attempt n+1 is above the highest of attempt n − 1 (bases 5,10,20…).
  expect(0.8 * 10_000).toBeGreaterThan(1.2 * 5_000);
});

it('caps at 5 min before jitter and never overflows (attempt 40, 1e6, Infinity)', () => {
  for (const attempt of [7, 40, 1_000_000, Number.POSITIVE_INFINITY]) {
    const d = retryBackoffMs(attempt);
    expect(d).toBeGreaterThanOrEqual(0.8 * RETRY_CAP_MS);
    expect(d).toBeLessThan(1.2 * RETRY_CAP_MS);
  }
  expect(retryBackoffMs(0)).toBeLessThan(1.2 * 5_000);
});

it('honours a custom base, capped at 5 min even when the base is larger', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 60 }), fc.double({ min: 1, max: 1e9, noNaN: true }), (attempt, base) => {
      const d = retryBackoffMs(attempt, base);
      const expected = Math.min(base * 2 ** (attempt - 1), RETRY_CAP_MS);
      return d >= 0.8 * expected && d < 1.2 * expected && d < SIX_MIN;
    }),
  );
  expect(() => retryBackoffMs(1, 0)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  expect(() => retryBackoffMs(Number.NaN)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  expect(LEASE_DURATION_MS).toBe(90_000);
});
