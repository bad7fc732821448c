import { randomBytes } from 'node:crypto';
import type { MeterProvider } from '@opentelemetry/api';
import { QErrorCode, isQError } from '@q/schema';
import { JobStore } from '@q/store';
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobQueue, METRIC_UNSERVED_ENQUEUES, type Logger } from '../src/index.js';
import { waitFor } from './helpers.js';

// JobQueue.open: one object that owns its store, runs workers per queue and drains them on close.

const randomUUIDLike = (): string => '00000000-0000-4000-8000-000000000000';

let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('jqopen');
});
afterAll(() => schema.drop());

/** A logger keeping its warnings. */
function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const noop = (): void => undefined;
  const logger = {
    warnings,
    trace: noop,
    debug: noop,
    info: noop,
    error: noop,
    fatal: noop,
    warn: (obj: unknown, msg?: string) => void warnings.push(String(msg ?? obj)),
    child: () => logger,
  };
  return logger as unknown as Logger & { warnings: string[] };
}

/** A meter provider recording counter adds (only what @q/otel calls). */
function recordingMeter(): {
  provider: MeterProvider;
  total(name: string): number;
  adds: Array<{ name: string; value: number; attributes: unknown }>;
} {
  const adds: Array<{ name: string; value: number; attributes: unknown }> = [];
  const counter = (name: string) => ({ add: (value: number, attributes?: unknown) => adds.push({ name, value, attributes }) });
  const observable = () => ({ addCallback: () => undefined, removeCallback: () => undefined });
  const meter = {
    createCounter: counter,
    createUpDownCounter: counter,
    createHistogram: () => ({ record: () => undefined }),
    createGauge: () => ({ record: () => undefined }),
    createObservableGauge: observable,
    createObservableCounter: observable,
    createObservableUpDownCounter: observable,
    addBatchObservableCallback: () => undefined,
    removeBatchObservableCallback: () => undefined,
  };
  return {
    provider: { getMeter: () => meter } as unknown as MeterProvider,
    adds,
    total: (name) => adds.filter((a) => a.name === name).reduce((s, a) => s + a.value, 0),
  };
}

describe('JobQueue.open', () => {
  it('runs the ten-line example: open, work, enqueue, the job succeeds with its result, close', async () => {
    const queue = await JobQueue.open(schema.dsn);
    const seen: unknown[] = [];
    queue.work('email', async (job) => {
      seen.push(job.payload);
      return { sent: true };
    });
    const job = await queue.enqueue({ type: 'email', payload: { to: 'a@example.com' } });
    const done = await waitFor(async () => {
      const j = await queue.get(job.uuid);
      return j?.status === 'succeeded' ? j : null;
    });
    expect(done.result).toEqual({ sent: true });
    expect(seen).toEqual([{ to: 'a@example.com' }]);
    await queue.close();
  });

  it('serves several types of one queue with one worker and several queues with one worker each', async () => {
    const queue = await JobQueue.open(schema.dsn);
    const ran: string[] = [];
    queue.work('a', async () => void ran.push('a'));
    queue.work('b', async () => void ran.push('b'));
    queue.work('c', async () => void ran.push('c'), { queue: 'other', concurrency: 2 });
    // Handlers registered together are all known before the first claim: no "no handler" failures.
    const jobs = await queue.enqueueMany([{ type: 'a' }, { type: 'b' }, { type: 'c', queue: 'other' }]);
    await waitFor(async () => (await Promise.all(jobs.map((j) => queue.get(j.uuid)))).every((j) => j?.status === 'succeeded'));
    expect(ran.sort()).toEqual(['a', 'b', 'c']);
    expect(() => queue.work('d', async () => undefined, { queue: 'other', concurrency: 3 })).toThrow(/concurrency 2/);
    await queue.close();
  });

  it('close() drains: a job in flight finishes and its outcome is recorded, then the store is closed', async () => {
    const queue = await JobQueue.open(schema.dsn);
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    queue.work('slow', async () => {
      started();
      await new Promise((r) => setTimeout(r, 300));
      return 'finished';
    });
    const job = await queue.enqueue({ type: 'slow' });
    await running;
    await queue.close();
    await queue.close(); // idempotent
    const err = await queue.get(job.uuid).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isQError(err) && err.code).toBe(QErrorCode.CLOSED);
    const store = await JobStore.open(schema.dsn, { migrate: false, maxConns: 1 });
    try {
      const after = await store.get(job.uuid);
      expect(after?.status).toBe('succeeded');
      expect(after?.result).toBe('finished');
    } finally {
      await store.close();
    }
    expect(() => queue.work('late', async () => undefined)).toThrow(/closed/);
  });

  it('a job enqueued to a queue nobody here serves is counted and warned about once, never refused', async () => {
    const logger = recordingLogger();
    const meter = recordingMeter();
    const queue = await JobQueue.open(schema.dsn, { logger, meterProvider: meter.provider, queues: ['elsewhere'] });
    try {
      queue.work('t', async () => undefined, { queue: 'served' });
      const lonely = `lonely-${randomBytes(3).toString('hex')}`;
      await queue.enqueue({ type: 't', queue: lonely });
      await queue.enqueueMany([
        { type: 't', queue: lonely },
        { type: 't', queue: lonely },
      ]);
      await queue.enqueue({ type: 't', queue: 'served' });
      await queue.enqueue({ type: 't', queue: 'elsewhere' }); // declared: served by another process
      expect(meter.total(METRIC_UNSERVED_ENQUEUES)).toBe(3);
      expect(meter.adds.filter((a) => a.name === METRIC_UNSERVED_ENQUEUES).map((a) => a.attributes)).toEqual([
        { queue: lonely },
        { queue: lonely },
      ]);
      expect(logger.warnings.filter((w) => w.includes('no worker of this process serves'))).toHaveLength(1);
      expect(logger.warnings[0]).toContain(lonely);
      // Stored, not dropped: a worker started later finds them.
      expect((await queue.list({ queue: lonely })).jobs).toHaveLength(3);
    } finally {
      await queue.close();
    }
  });

  it('a queue built on a store keeps the knownQueues contract and does not run workers', async () => {
    const store = await JobStore.open(schema.dsn, { maxConns: 2 });
    try {
      const queue = new JobQueue(store, { knownQueues: ['default'] });
      const err = await queue.enqueue({ type: 't', queue: 'nope' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isQError(err) && err.code).toBe(QErrorCode.UNKNOWN_QUEUE);
      expect(() => queue.work('t', async () => undefined)).toThrow(/JobQueue.open/);
      await queue.close(); // the store is the caller's: still open
      expect(await store.get(randomUUIDLike())).toBeNull();
    } finally {
      await store.close();
    }
  });
});
