// The local queue on its own (a pure data structure): claim order across rounds, taking from the
// head, removing, and giving back from the tail.
import type { LeasedJob } from '@q/store';
import { expect, it } from 'vitest';
import { Execution } from '../src/execution.js';
import { LocalQueue } from '../src/local-queue.js';

const job = (id: number, priority = 0, runAtMs = 0): LeasedJob => ({ id, priority, runAt: new Date(runAtMs), leaseToken: `t${id}` }) as LeasedJob;
const exec = (id: number, priority = 0, runAtMs = 0) =>
  new Execution(job(id, priority, runAtMs), 0, { updateSteps: async () => true, updateProgress: async () => true });
const ids = (items: Array<Execution | undefined>) => items.map((e) => e?.job.id);
const drain = (q: LocalQueue) => {
  const out: Array<Execution | undefined> = [];
  while (q.length > 0) out.push(q.shift());
  return ids(out);
};

it('keeps claim order across rounds: priority first, then run_at, then id; a tie keeps the waiting job first', () => {
  const q = new LocalQueue();
  q.push([exec(1, 0, 10), exec(2, 0, 20), exec(3, 0, 30)]);
  expect(ids([q.shift()])).toEqual([1]);
  // A later round: a higher-priority job goes to the front, an earlier run_at in between.
  q.push([exec(7, 5, 99), exec(4, 0, 15), exec(9, 0, 40)]);
  expect(q.length).toBe(5);
  expect(drain(q)).toEqual([7, 4, 2, 3, 9]);
  expect(q.shift()).toBeUndefined();
  // An unsorted round is sorted; a round wholly after the waiting jobs is appended.
  q.push([exec(12, 0, 2), exec(11, 0, 1)]);
  q.push([exec(13, 0, 3)]);
  expect(drain(q)).toEqual([11, 12, 13]);
});

it('remove drops a waiting job only; takeLast gives back the tail; takeAll empties the queue', () => {
  const q = new LocalQueue();
  const items = [1, 2, 3, 4, 5].map((id) => exec(id, 0, id));
  q.push(items);
  expect(ids([q.shift()])).toEqual([1]);
  items[0]!.state = 'running';
  expect(q.remove(items[0]!)).toBe(false); // started: not here any more
  expect(q.remove(items[2]!)).toBe(true);
  expect(q.length).toBe(3);
  expect(ids(q.takeLast(2))).toEqual([4, 5]);
  expect(ids(q.takeLast(0))).toEqual([]);
  q.push([exec(6, 0, 6)]);
  expect(ids(q.takeAll())).toEqual([2, 6]);
  expect(q.length).toBe(0);
  expect(q.shift()).toBeUndefined();
});
