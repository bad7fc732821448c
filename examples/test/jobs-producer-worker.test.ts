import { createTestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { main as producerWorker } from '../jobs-producer-worker.js';

it('jobs-producer-worker.ts enqueues a job and a worker runs it with steps', async () => {
  const schema = await createTestSchema('exjobs');
  try {
    const job = await producerWorker(schema.dsn);
    expect(job).toMatchObject({ status: 'succeeded', result: { url: 'https://shop.example.com' }, attempt: 1 });
    expect(job.steps.map((s) => [s.name, s.status, s.message])).toEqual([
      ['pull image', 'succeeded', 'shop:1.4.2'],
      ['migrate database', 'skipped', 'no pending migrations'],
      ['switch traffic', 'succeeded', undefined],
    ]);
  } finally {
    await schema.drop();
  }
});
