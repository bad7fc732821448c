import type { TracerProvider } from '@opentelemetry/api';
import { check } from '../verify.js';
import { loadPartition, loadStore, missing, need, type QStore } from './q-api.js';
import { PAYLOAD, QUEUE, ROUTE, idOf, indexOf, type RequestHarness, type RequestSystem } from './requests.js';

const TTL_MS = 30_000;

async function openStore(dsn: string, poolSize: number, tp: TracerProvider | undefined): Promise<QStore> {
  const { RequestStore } = await need(loadStore);
  return RequestStore.open(dsn, { maxConns: poolSize, ...(tp ? { tracerProvider: tp } : {}) });
}

function common(store: QStore) {
  const deadline = Math.floor(Date.now() / 1000) + 3600;
  const count = async (sql: string) => Number((await store.pool.query<{ n: string }>(sql)).rows[0]?.n ?? 0);
  return {
    async enqueue(from: number, n: number) {
      await store.enqueue(
        Array.from({ length: n }, (_, k) => ({ id: idOf(from + k), token: 't', queue: QUEUE, deadline, envelope: '{}', payload: PAYLOAD })),
      );
    },
    stored: () => count('SELECT count(*) AS n FROM q_requests'),
    results: () => store.resultDepth(ROUTE),
  };
}

/**
 * `q` through `RequestStore` alone: each of `runners` owners acquires its share of the 64 partitions,
 * then loops `dispatch(batch)` → `ack` until its partitions are empty (the store's own cycle).
 */
export function qStoreRequests(name = 'q', tracerProvider?: () => TracerProvider): RequestSystem {
  return {
    name,
    skip: () => missing(loadStore),
    async open(dsn, poolSize): Promise<RequestHarness> {
      const store = await openStore(dsn, poolSize, tracerProvider?.());
      return {
        ...common(store),
        async drain({ runners, batch, onHandled }) {
          await store.ensurePartitions(QUEUE);
          const owners = Array.from({ length: runners }, (_, k) => `owner-${k}`);
          const share = Math.ceil(64 / runners);
          let now = await store.now();
          for (const owner of owners) {
            const leases = await store.acquirePartitions(QUEUE, owner, now, TTL_MS, share);
            check(leases.length > 0, `q: ${owner} acquired no partition`);
          }
          await Promise.all(
            owners.map(async (owner) => {
              for (;;) {
                now = new Date(Date.now());
                const reqs = await store.dispatch(QUEUE, owner, now, batch);
                if (reqs.length === 0) return;
                for (const r of reqs) onHandled(indexOf(r.id));
                const ok = await store.ack(
                  owner,
                  reqs.map((r) => ({ id: r.id, token: r.token, attempt: r.attempt, route: ROUTE, payload: '' })),
                );
                const fenced = ok.filter((x) => !x).length;
                check(fenced === 0, `q: ${fenced} of ${ok.length} acks fenced`);
              }
            }),
          );
        },
        close: () => store.close(),
      };
    },
  };
}

/**
 * `q` as users run it: `runners` × `runPartitionWorker` in this process (partition leases,
 * rebalancing, batched acks), stopped once every result is written.
 */
export function qRunnerRequests(name = 'q-runner', tracerProvider?: () => TracerProvider): RequestSystem {
  return {
    name,
    skip: () => missing(loadStore, loadPartition),
    async open(dsn, poolSize): Promise<RequestHarness> {
      const store = await openStore(dsn, poolSize, tracerProvider?.());
      const { runPartitionWorker } = await need(loadPartition);
      const c = common(store);
      return {
        ...c,
        async drain({ runners, batch, expected, onHandled }) {
          const stop = new AbortController();
          const workers = Array.from({ length: runners }, (_, k) =>
            runPartitionWorker({
              store,
              queue: QUEUE,
              owner: `runner-${k}`,
              concurrency: batch,
              batchSize: batch,
              leaseTtlMs: 5_000,
              drainTimeoutMs: 1_000,
              signal: stop.signal,
              handle: async (req) => {
                onHandled(indexOf(req.id));
                return { result: { route: ROUTE, payload: '' } };
              },
            }),
          );
          const failed = Promise.all(workers).then(() => {
            if (!stop.signal.aborted) throw new Error('q-runner: runPartitionWorker returned before it was stopped');
          });
          try {
            for (;;) {
              if ((await c.results()) >= expected) break;
              await Promise.race([new Promise((r) => setTimeout(r, 5)), failed]);
            }
          } finally {
            stop.abort();
            await Promise.all(workers);
          }
        },
        close: () => store.close(),
      };
    },
  };
}
