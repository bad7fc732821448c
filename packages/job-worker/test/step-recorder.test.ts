import type { Step } from '@q/store';
import { expect, it } from 'vitest';
import { StepRecorder } from '../src/index.js';
import { timestamp } from '../src/step-recorder.js';

// The recorder's own contract with its writer (the worker passes a fenced store write; the
// worker tests check what reaches Postgres).
function recorder(fail = false) {
  const writes: Step[][] = [];
  const rec = new StepRecorder(async (steps) => {
    if (fail) throw new Error('database down');
    writes.push(steps);
    return true;
  });
  return { rec, writes };
}

it('succeed/fail on an empty timeline do nothing and write nothing', async () => {
  const { rec, writes } = recorder();
  await rec.succeed('x');
  await rec.fail('y');
  expect(writes).toEqual([]);
  expect(rec.steps).toEqual([]);
});

it('start appends running; succeed/fail overwrite the last step whatever its status; empty message keeps the old one', async () => {
  const { rec, writes } = recorder();
  await rec.start('a');
  await rec.start('b'); // a stays running
  await rec.succeed('done');
  await rec.fail(''); // overwrites b again, message kept
  const [a, b] = rec.steps;
  expect(a).toMatchObject({ name: 'a', status: 'running' });
  expect(a).not.toHaveProperty('finished_at');
  expect(b).toMatchObject({ name: 'b', status: 'failed', message: 'done' });
  expect(Object.keys(b!)).toEqual(['name', 'status', 'message', 'started_at', 'finished_at']);
  expect(writes).toHaveLength(4);
  expect(writes[3]).toEqual(rec.steps);
});

it('skip records equal start and finish times and keeps an empty message', async () => {
  const { rec } = recorder();
  await rec.skip('s', '');
  const [s] = rec.steps;
  expect(s).toEqual({ name: 's', status: 'skipped', message: '', started_at: s!.started_at, finished_at: s!.started_at });
});

it('a failing write never throws', async () => {
  const { rec } = recorder(true);
  await expect(rec.start('a')).resolves.toBeUndefined();
  await expect(rec.flush()).resolves.toBeUndefined();
});

it('timestamps are RFC 3339 UTC with trailing fractional zeros trimmed', () => {
  expect(timestamp(new Date('2026-08-15T09:33:02.120Z'))).toBe('2026-08-15T09:33:02.12Z');
  expect(timestamp(new Date('2026-08-15T09:33:00.000Z'))).toBe('2026-08-15T09:33:00Z');
  expect(timestamp(new Date('2026-08-15T09:33:02.001Z'))).toBe('2026-08-15T09:33:02.001Z');
});
