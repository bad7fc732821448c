/* eslint-disable @typescript-eslint/no-require-imports -- require() is what this CommonJS consumer tests */
// A CommonJS application of q: require() of every published package (Node >= 20.19 loads their
// ESM builds), then real calls on PostgreSQL. Prints one JSON line.
const { isQError, validateDsn } = require('@q/schema');
const { METRIC, jobMetrics } = require('@q/otel');
const { createQuota } = require('@q/quota');
const { JobStore, RequestStore } = require('@q/store');
const { JobQueue, Worker } = require('@q/job-worker');
const { Consumer, runPartitionWorker } = require('@q/partition-consumer');
const { startTelemetry } = require('@q/otel/sdk');
const { createDashboard } = require('@q/dashboard');

require('./calls.cjs')
  .run({
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
  })
  .then(
    (out) => console.log(JSON.stringify({ kind: 'cjs', ...out })),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
