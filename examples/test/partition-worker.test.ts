import { createTestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { main as partitionWorker } from '../partition-worker.js';

it('partition-worker.ts serves a queue with runPartitionWorker and returns its results', async () => {
  const schema = await createTestSchema('ex_pw');
  try {
    expect(await partitionWorker(schema.dsn)).toEqual(['hello, ada', 'hello, edsger', 'hello, grace']);
  } finally {
    await schema.drop();
  }
}, 60_000);
