// The AIMD window of one endpoint (issue 43), driven call by call: it shrinks on 429s, 5xx and
// calls over the latency target (once per round of calls), grows back by the step per window of
// calls that went well, never leaves [min, max], and a caller waits while the window is full.
import { describe, expect, it } from 'vitest';
import { AdaptiveConcurrency, type AdaptiveConcurrencySettings, type AdaptiveSlot } from '../src/pipeline/adaptive-concurrency.js';

const E = 'http://model/v1/chat/completions';
const settings: AdaptiveConcurrencySettings = { initial: 8, min: 2, max: 16, latencyTargetMs: 100, increaseStep: 1, decreaseFactor: 0.5 };

async function take(l: AdaptiveConcurrency, n: number): Promise<AdaptiveSlot[]> {
  const out: AdaptiveSlot[] = [];
  for (let i = 0; i < n; i++) out.push((await l.acquire(E))!);
  return out;
}

describe('AdaptiveConcurrency', () => {
  it('grows by the step per window of good calls up to max, and never past it', async () => {
    const l = new AdaptiveConcurrency(settings);
    expect(l.limit(E)).toBe(8);
    for (let round = 0; round < 40; round++) {
      const slots = await take(l, l.limit(E));
      expect(l.inFlight(E)).toBeLessThanOrEqual(16);
      for (const s of slots) s.done('ok', 10);
    }
    expect(l.limit(E)).toBe(16);
  });

  it('halves on a 429 once per round (calls started before the decrease do not count again), down to min', async () => {
    let t = 0;
    const l = new AdaptiveConcurrency(settings, undefined, () => t);
    const slots = await take(l, 8);
    t = 1;
    for (const s of slots) s.done('congested', 10); // one round of 429s: one decrease
    expect(l.limit(E)).toBe(4);
    for (let round = 0; round < 5; round++) {
      t += 1;
      const more = await take(l, l.limit(E));
      t += 1;
      more[0]!.done('congested', 10);
      for (const s of more.slice(1)) s.done('congested', 10);
    }
    expect(l.limit(E)).toBe(2);
  });

  it('a call over the latency target shrinks the window like a 429; a neutral end changes nothing', async () => {
    let t = 0;
    const l = new AdaptiveConcurrency(settings, undefined, () => t);
    const [a, b] = await take(l, 2);
    t = 1;
    b!.done('neutral', 500);
    expect(l.limit(E)).toBe(8);
    a!.done('ok', 101);
    expect(l.limit(E)).toBe(4);
  });

  it('a full window makes the next caller wait until a slot is given back; an abort ends the wait', async () => {
    const l = new AdaptiveConcurrency({ ...settings, initial: 2, min: 1, max: 2 });
    const [a] = await take(l, 2);
    let got = false;
    const waiting = l.acquire(E).then((s) => {
      got = true;
      return s;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(got).toBe(false);
    a!.done('ok', 5);
    const s = await waiting;
    expect(s).toBeDefined();
    expect(l.inFlight(E)).toBe(2);
    const ac = new AbortController();
    const aborted = l.acquire(E, ac.signal);
    ac.abort();
    expect(await aborted).toBeUndefined();
    expect(l.inFlight(E)).toBe(2);
  });
});
