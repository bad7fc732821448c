// The adaptive local queue's size (pure): from handler and round-trip times, bounded, and shrinking on a stall.
import { expect, it } from 'vitest';
import { LocalQueueSize, autoPrefetchMax } from '../src/local-queue-size.js';

it('a fixed prefetch stays as given; auto is 0 until both times are measured', () => {
  expect(new LocalQueueSize(8, 50).size).toBe(50);
  const s = new LocalQueueSize(8, 'auto');
  expect(s.adaptive).toBe(true);
  expect(s.size).toBe(0);
  s.roundTrip(2);
  expect(s.size).toBe(0);
  s.handler(100);
  expect(s.size).toBe(0); // 2 × 8 × 2 / 100 = 0.32: long jobs are claimed only for free slots
});

it('sizes two round trips of work: 2 × concurrency × roundTrip / handler, capped at 128 per slot (1,024 in all)', () => {
  const s = new LocalQueueSize(8, 'auto');
  s.roundTrip(4);
  s.handler(2);
  expect(s.size).toBe(32); // 2 × 8 × 4 / 2
  const fast = new LocalQueueSize(8, 'auto');
  fast.roundTrip(4);
  fast.handler(0);
  expect(fast.size).toBe(autoPrefetchMax(8));
  expect([autoPrefetchMax(1), autoPrefetchMax(8), autoPrefetchMax(32)]).toEqual([128, 1024, 1024]);
});

it('a stall counts as handler time: blocked slots stop the local queue from filling', () => {
  let stalled = 0;
  const s = new LocalQueueSize(2, 'auto', () => stalled);
  s.roundTrip(2);
  s.handler(0.2);
  expect(s.size).toBe(40); // 2 × 2 × 2 / 0.2
  stalled = 400;
  expect(s.size).toBe(0);
});
