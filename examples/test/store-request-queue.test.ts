import { createTestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { main as storeRequestQueue } from '../store-request-queue.js';

it('store-request-queue.ts runs a producer and a dispatcher end to end', async () => {
  const schema = await createTestSchema('exstore');
  try {
    expect(await storeRequestQueue(schema.dsn)).toEqual([
      'greet-alpha: {"hello":"alpha"}',
      'greet-beta: {"hello":"beta"}',
      'greet-gamma: {"hello":"gamma"}',
    ]);
  } finally {
    await schema.drop();
  }
});
