import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTs, useQuotaStore, type TestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { QuotaStore } from '../src/index.js';
import { dbNowMs, sleep } from './helpers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
let schema: TestSchema;
let store: QuotaStore;

useQuotaStore(QuotaStore, { prefix: 'qcrash', maxConns: 3 }, (t) => ({ schema, store } = t));

it('a SIGKILLed process’s slots count again after its TTL, never before', async () => {
  const TTL = 1_500;
  const LIMIT = 3;
  const key = 'tenant:crash';
  const { child } = spawnTs(path.join(here, 'fixtures/hold-slots.ts'), {
    env: { QUOTA_DSN: schema.dsn, QUOTA_KEY: key, QUOTA_LIMIT: String(LIMIT), QUOTA_TTL_MS: String(TTL) },
    stderr: 'inherit',
  });
  try {
    const holder = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line && out.includes('\n')) resolve((JSON.parse(line) as { holder: string }).holder);
      });
      child.once('exit', (code) => reject(new Error(`child exited early (${code})`)));
    });
    await store.registerQuotaHolder('observer', 600_000);
    expect(await store.acquireQuotaSlots('observer', key, 1, LIMIT)).toBe(0);
    // Let the child renew at least once (every ttl/3), then kill it without any cleanup.
    await sleep(TTL / 2);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));

    let refusedAfterKill = 0;
    for (let i = 0; ; i++) {
      expect(i).toBeLessThan(400); // bounded: ~20 s
      const { rows } = await schema.pool().query<{ expires_ms: string }>(`SELECT expires_ms FROM q_quota_holders WHERE holder = $1`, [holder]);
      const expires = Number(rows[0]!.expires_ms);
      const before = await dbNowMs(schema.pool());
      const granted = await store.acquireQuotaSlots('observer', key, 1, LIMIT);
      const after = await dbNowMs(schema.pool());
      if (granted > 0) {
        // Granted: the acquire ran after the dead holder's lease ended.
        expect(after).toBeGreaterThan(expires);
        break;
      }
      // Refused: the lease may still have been running when the acquire ran.
      expect(before).toBeLessThanOrEqual(expires);
      refusedAfterKill += 1;
      await sleep(50);
    }
    expect(refusedAfterKill).toBeGreaterThan(0); // the slots did not come back at once
    expect(await store.acquireQuotaSlots('observer', key, LIMIT, LIMIT)).toBe(LIMIT - 1);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});
