import type pg from 'pg';
import { QuotaStore } from '@q/quota';
import { installedModules } from '@q/schema';
import { RequestStore } from '@q/store';
import type { PurgeTargets } from './handlers/purge.js';
import { advisoryPurgeLock } from './purge-lock.js';

/**
 * What `maintenance.purge` can clean in this database: always the jobs; the request queue's
 * results and the quota bookkeeping only when those modules are migrated in the same schema
 * (read from the migration journal; the worker never migrates them itself); and the lock that keeps
 * runs one at a time. Closers are pushed onto `cleanups`.
 */
export async function purgeTargets(
  pool: pg.Pool,
  jobs: PurgeTargets['jobs'],
  dsn: string,
  cleanups: Array<() => Promise<void>>,
): Promise<PurgeTargets> {
  const installed = await installedModules(pool);
  const targets: PurgeTargets = { jobs, lock: advisoryPurgeLock(pool) };
  if (installed.requests) {
    const store = await RequestStore.open(dsn, { maxConns: 1, migrate: false, applicationName: 'akerdock-purge' });
    cleanups.push(() => store.close());
    targets.results = store;
  }
  if (installed.quota) targets.quota = QuotaStore.fromPool(pool);
  return targets;
}
