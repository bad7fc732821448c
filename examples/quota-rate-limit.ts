// README example: rate-limit an outbound API per tenant, counted across every process that shares
// the database (exact sliding window and concurrency slots, both on the database clock).
//   DATABASE_URL=postgres://… npx tsx examples/quota-rate-limit.ts
import { createQuota, type Quota } from '@q/quota';

// At most 5 calls per tenant per minute, and at most 2 in flight per tenant at once.
export async function callForTenant(quota: Quota, tenant: string, call: () => Promise<string>): Promise<string> {
  if (!(await quota.admit(`tenant:${tenant}`, 5, 60_000))) return 'rate limited'; // e.g. answer 429
  const release = await quota.acquire(`tenant:${tenant}`, 2);
  if (!release) return 'busy';
  try {
    return await call();
  } finally {
    await release();
  }
}

/** Makes 8 calls for each of two tenants and returns what each call got. */
export async function main(dsn = process.env.DATABASE_URL): Promise<Record<string, string[]>> {
  if (!dsn) throw new Error('set DATABASE_URL');
  const quota = await createQuota({ dsn, ttlMs: 10_000 });
  const outcomes: Record<string, string[]> = { acme: [], globex: [] };
  try {
    for (let n = 0; n < 8; n++) {
      for (const tenant of ['acme', 'globex']) {
        // Stands in for the outbound API (an HTTP call in real life).
        (outcomes[tenant] ??= []).push(await callForTenant(quota, tenant, async () => `sent #${n}`));
      }
    }
  } finally {
    await quota.close();
  }
  return outcomes;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await main());
}
