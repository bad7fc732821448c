// An ESM application of q: static imports of every published package, then the same real calls
// on PostgreSQL as probe.cjs. Prints one JSON line.
import { isQError, validateDsn } from '@q/schema';
import { METRIC, jobMetrics } from '@q/otel';
import { createQuota } from '@q/quota';
import { JobStore, RequestStore } from '@q/store';
import { JobQueue, Worker } from '@q/job-worker';
import { Consumer, runPartitionWorker } from '@q/partition-consumer';
import { startTelemetry } from '@q/otel/sdk';
import { createDashboard } from '@q/dashboard';
import calls from './calls.cjs';

const out = await calls.run({
  isQError,
  validateDsn,
  METRIC,
  jobMetrics,
  createQuota,
  JobStore,
  RequestStore,
  JobQueue,
  Worker,
  Consumer,
  runPartitionWorker,
  createDashboard,
  startTelemetry,
});
console.log(JSON.stringify({ kind: 'esm', ...out }));
