import { describe, expect, it } from 'vitest';
import { parseRetryAfter, retryBackoffSeconds } from '../src/http/retry.js';

describe('Retry-After', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it('parses seconds and the three HTTP-date forms, ignores junk', () => {
    expect(parseRetryAfter('7', now)).toBe(7);
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30);
    expect(parseRetryAfter('Thursday, 01-Jan-26 00:00:10 GMT', now)).toBe(10);
    expect(parseRetryAfter('Thu Jan  1 00:00:05 2026', now)).toBe(5);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0); // in the past → 0
    for (const junk of ['-3', '1.5', 'soon', '', undefined]) expect(parseRetryAfter(junk, now)).toBeUndefined();
  });
});

describe('retry backoff (docs/design/dispatcher.md#retry-algorithm)', () => {
  const base = { secondsToDeadline: 10_000, baseSeconds: 2, capSeconds: 60 };
  it('doubles with equal jitter and caps at 60 s', () => {
    for (const [rc, lo, hi] of [
      [0, 2, 4],
      [1, 4, 8],
      [2, 8, 16],
      [3, 16, 32],
      [4, 30, 60],
      [9, 30, 60],
    ] as const) {
      expect(retryBackoffSeconds({ ...base, retryCount: rc, random: () => 0 })).toBe(lo);
      expect(retryBackoffSeconds({ ...base, retryCount: rc, random: () => 0.999999 })).toBeCloseTo(hi, 3);
    }
  });
  it('is bounded by the time left', () => {
    expect(retryBackoffSeconds({ ...base, secondsToDeadline: 3, retryCount: 5, random: () => 0.999999 })).toBeLessThan(3);
  });
  it('honours a longer Retry-After, clamped to half the time left plus ≤ 25 %', () => {
    expect(retryBackoffSeconds({ ...base, retryCount: 0, retryAfter: 9, random: () => 0 })).toBe(9);
    expect(retryBackoffSeconds({ ...base, retryCount: 0, retryAfter: 9, random: () => 0.999999 })).toBeCloseTo(11.25, 3);
    expect(retryBackoffSeconds({ ...base, secondsToDeadline: 10, retryCount: 0, retryAfter: 100, random: () => 0 })).toBe(5);
  });
  it('honours a shorter Retry-After (issue 35), at least 100 ms and never above the own backoff', () => {
    expect(retryBackoffSeconds({ ...base, retryCount: 0, retryAfter: 1, random: () => 0 })).toBe(1);
    expect(retryBackoffSeconds({ ...base, retryCount: 0, retryAfter: 1, random: () => 0.999999 })).toBeCloseTo(1.25, 3);
    // The second retry too: Retry-After 1 s, not 4–8 s.
    expect(retryBackoffSeconds({ ...base, retryCount: 1, retryAfter: 1, random: () => 0.5 })).toBeCloseTo(1.125, 3);
    expect(retryBackoffSeconds({ ...base, retryCount: 0, retryAfter: 0, random: () => 0 })).toBe(0.1);
    // Shorter than the own backoff, but its jitter would pass it: the own backoff bounds it.
    expect(retryBackoffSeconds({ ...base, capSeconds: 1, retryCount: 0, retryAfter: 0.95, random: () => 0.999999 })).toBeCloseTo(1, 3);
  });
});
