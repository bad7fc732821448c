// The pace at which parked requests of a saturated key come back (the `pnpm demo` throughput
// regression of admission parking): it follows the slot hold time measured here, and a faster
// pace brings the return times of a key's backlog closer instead of queueing behind slow guesses.
import { describe, expect, it } from 'vitest';
import type { GateConfig } from '../src/config/schema.js';
import { KeyLoad, returnRate } from '../src/pipeline/admission.js';

const gate = (limit: number): GateConfig => ({
  kind: 'concurrency',
  attribute: 'userid',
  limit,
  window_ms: 1000,
  prefix: 'quota:',
  wait_ms: 1000,
});

describe('admission return pace', () => {
  it('follows the measured slot hold time: 8 slots held 50 ms each get 1.5 × 160 back a second', () => {
    const load = new KeyLoad();
    // Nothing timed yet: 20 × limit (a slot turning over every 50 ms), 1.5 times over. A slow
    // first guess spread the backlog too far ahead: parked rows cannot be called back early.
    expect(returnRate(gate(8), 'quota:userid:a', load)).toBe(240);
    for (let i = 0; i < 20; i++) {
      load.acquired('quota:userid:a');
      load.released('quota:userid:a', 50);
    }
    expect(returnRate(gate(8), 'quota:userid:a', load)).toBe(240);
    // 2 slots of 150 ms (the head-of-line test's tenant): 13.3 a second, 1.5 times over.
    load.acquired('quota:userid:b');
    load.released('quota:userid:b', 150);
    expect(returnRate(gate(2), 'quota:userid:b', load)).toBe(20);
    // Rate gates are paced by their window, as before.
    expect(returnRate({ ...gate(10), kind: 'rate', window_ms: 1000 }, 'quota:userid:c', load)).toBe(20);
  });

  it('a faster pace brings the return time of a key’s parked backlog closer', () => {
    const load = new KeyLoad();
    const now = Date.now() / 1000;
    let last = 0;
    for (let i = 0; i < 320; i++) last = load.parkAt('k', 32); // ten seconds ahead at 32/s
    expect(last).toBeGreaterThanOrEqual(Math.floor(now + 10));
    // The key's slots turn over ten times faster than guessed: the next parked request returns
    // about a second after the (rescaled) backlog, not ten seconds out.
    const next = load.parkAt('k', 320);
    expect(next).toBeLessThanOrEqual(Math.floor(now + 1 + 1 + 1));
    expect(next).toBeGreaterThanOrEqual(Math.floor(now + 1));
  });
});
