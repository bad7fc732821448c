import { createTestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { main as quotaRateLimit } from '../quota-rate-limit.js';

it('quota-rate-limit.ts lets 5 calls per tenant per minute through, for each tenant', async () => {
  const schema = await createTestSchema('exquota');
  try {
    const limited = ['rate limited', 'rate limited', 'rate limited'];
    const expected = ['sent #0', 'sent #1', 'sent #2', 'sent #3', 'sent #4', ...limited];
    expect(await quotaRateLimit(schema.dsn)).toEqual({ acme: expected, globex: expected });
    // Another process within the same minute gets no more calls through.
    expect(await quotaRateLimit(schema.dsn)).toEqual({
      acme: [...limited, ...limited, 'rate limited', 'rate limited'],
      globex: [...limited, ...limited, 'rate limited', 'rate limited'],
    });
  } finally {
    await schema.drop();
  }
});
