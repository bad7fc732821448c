// The calls both probes make with what they loaded: a quota slot, a job enqueued and run by a
// worker to success, a QError for a bad DSN, and @q/otel/sdk without its optional peers.
exports.run = async function run(q) {
  const dsn = process.env.PROBE_DSN;
  const out = {};

  const quota = await q.createQuota({ dsn, ttlMs: 5000 });
  const first = await quota.acquire('tenant:probe', 1);
  const second = await quota.acquire('tenant:probe', 1);
  await first?.();
  await quota.close();
  out.quota = { first: first !== null, second: second !== null };

  const store = await q.JobStore.open(dsn);
  try {
    const queue = new q.JobQueue(store, { knownQueues: ['default'] });
    const job = await queue.enqueue({ type: 'probe.echo', payload: { n: 41 } });
    const worker = new q.Worker(store, { queues: ['default'], concurrency: 1, metrics: q.jobMetrics() });
    worker.register('probe.echo', async (j) => ({ n: j.payload.n + 1 }));
    const stop = new AbortController();
    const running = worker.run(stop.signal);
    let done = null;
    for (const until = Date.now() + 20_000; Date.now() < until;) {
      done = await queue.get(job.uuid);
      if (done?.status === 'succeeded') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    stop.abort();
    await running;
    await worker.wait(5_000);
    out.job = { status: done?.status, result: done?.result };
  } finally {
    await store.close();
  }

  try {
    q.validateDsn('mysql://u:secret@h/db');
    out.badDsn = 'accepted';
  } catch (err) {
    out.badDsn = q.isQError(err, 'UNSUPPORTED_DSN') ? 'QError UNSUPPORTED_DSN' : String(err);
  }
  try {
    q.startTelemetry({ serviceName: 'probe' });
    out.sdk = 'started';
  } catch (err) {
    out.sdk =
      q.isQError(err, 'CONFIG') && /npm install @q\/otel @opentelemetry\//.test(err.message) ? 'QError CONFIG with install line' : String(err);
  }
  out.loaded = {
    metric: q.METRIC.jobsDuration,
    classes: [q.RequestStore, q.Consumer, q.runPartitionWorker, q.createDashboard].map((x) => typeof x),
  };
  return out;
};
