import { createTestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { main as drizzleExample } from '../enqueue-in-transaction-drizzle.js';
import { main as pgExample } from '../enqueue-in-transaction-pg.js';

it('enqueue-in-transaction-pg.ts: the committed order has its job, the rolled-back one has neither', async () => {
  const schema = await createTestSchema('extxpg');
  try {
    const r = await pgExample(schema.dsn);
    expect(r.committed).toMatchObject({ type: 'order.confirm', status: 'queued', payload: { orderId: expect.any(Number) } });
    expect(r.orders).toBe(1);
    expect(r.jobs).toBe(1);
  } finally {
    await schema.drop();
  }
});

it('enqueue-in-transaction-drizzle.ts: Drizzle transaction and trigger jobs exist only for the committed signup', async () => {
  const schema = await createTestSchema('extxdz');
  try {
    const jobs = await drizzleExample(schema.dsn);
    expect(jobs).toEqual([
      { type: 'crm.sync', payload: { signupId: expect.any(Number) } },
      { type: 'email.welcome', payload: { signupId: expect.any(Number) } },
    ]);
    expect((jobs[0]!.payload as { signupId: number }).signupId).toBe((jobs[1]!.payload as { signupId: number }).signupId);
  } finally {
    await schema.drop();
  }
});
