import { describe, expect, it } from 'vitest';
import { percentile, summarize } from '../src/stats.js';
import { ExactlyOnce, VerificationError } from '../src/verify.js';

describe('stats', () => {
  it('summarizes min, median and max', () => {
    expect(summarize([3, 1, 2])).toEqual({ min: 1, median: 2, max: 3, n: 3 });
    expect(summarize([4, 1, 3, 2]).median).toBe(2.5);
  });
  it('takes nearest-rank percentiles', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(xs, 50)).toBe(50);
    expect(percentile(xs, 99)).toBe(99);
    expect(percentile([7], 99)).toBe(7);
  });
});

describe('ExactlyOnce', () => {
  it('fails loudly on a duplicate and on a missing item', () => {
    const dup = new ExactlyOnce(3);
    [0, 1, 2, 1].forEach((i) => dup.hit(i));
    expect(() => dup.verify('dup')).toThrow(VerificationError);
    const missing = new ExactlyOnce(3);
    [0, 2].forEach((i) => missing.hit(i));
    expect(() => missing.verify('missing')).toThrow(/1 never handled/);
    const ok = new ExactlyOnce(2);
    [1, 0].forEach((i) => ok.hit(i));
    expect(() => ok.verify('ok')).not.toThrow();
  });
});
