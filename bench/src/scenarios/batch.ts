// The dispatcher's Batch API (issue 43): a JSONL batch uploaded, dispatched and collected into its
// output file, against a raw loop calling the same simulated model server at the same
// concurrency — what the queue, the gates and the files cost over the calls themselves.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Measurement, RunContext, Scenario, System } from '../scenario.js';
import { check } from '../verify.js';

// ---- the parts of @q/dispatcher used here (its public API, loaded from its build) ----------
interface InferenceServer {
  url: string;
  close(): Promise<void>;
}
interface DispatcherModule {
  loadConfig(opts: { env: Record<string, string>; document: Record<string, unknown> }): unknown;
  Dispatcher: { start(opts: { config: unknown }): Promise<{ stop(): Promise<unknown>; batchApiPort: number | undefined }> };
  startInferenceServer(opts: { behaviour: unknown; record?: boolean }): Promise<InferenceServer>;
  simulated(opts: { latencyMs: [number, number]; rate429: number; rate503: number }): unknown;
  hashApiKey(key: string): string;
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DIST = path.resolve(HERE, '../../../apps/dispatcher/dist/index.js');
const load = async (): Promise<DispatcherModule> => (await import(pathToFileURL(DIST).href)) as DispatcherModule;
const skip = async (): Promise<string | undefined> => {
  if (!existsSync(DIST)) return `@q/dispatcher is not built (${DIST})`;
  return typeof (await load()).hashApiKey === 'function' ? undefined : '@q/dispatcher has no Batch API yet';
};

/** Calls in flight: the dispatcher's workers and its tenant's concurrency gate, and the raw loop's callers. */
const CONCURRENCY = 64;
/** The simulated model's latency per call (fixed, no errors): the work both systems wait on. */
const LATENCY_MS = 20;
const KEY = 'sk-bench-0123456789abcdef';

function line(i: number): string {
  return JSON.stringify({
    custom_id: `r-${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'sim', messages: [{ role: 'user', content: `request ${i}` }], max_tokens: 16 },
  });
}

/**
 * `batch-50k`: 50,000 chat-completion lines as one JSONL file through the Batch API (upload,
 * create, poll every 100 ms until `completed`, download the output file), the dispatcher at 64
 * calls in flight against a simulated model answering in 20 ms; `rate` = lines per second from
 * the upload's start to the output's last byte. `raw-loop` = 64 callers posting the same bodies
 * straight to the same server. Every `custom_id` must appear exactly once in the output.
 */
export function batch50k(): Scenario {
  const systems: System[] = [
    { name: 'q', skip, run: (ctx) => viaBatchApi(ctx) },
    { name: 'raw-loop', skip, run: (ctx) => rawLoop(ctx) },
  ];
  return {
    name: 'batch-50k',
    title: `Batch API: 50,000 lines, ${CONCURRENCY} calls in flight, ${LATENCY_MS} ms model`,
    maxReps: 3,
    metrics: [{ key: 'rate', unit: 'lines/s', better: 'higher' }],
    baseline: 'q',
    systems,
  };
}

async function withModel<T>(fn: (d: DispatcherModule, model: InferenceServer) => Promise<T>): Promise<T> {
  const d = await load();
  const model = await d.startInferenceServer({
    behaviour: d.simulated({ latencyMs: [LATENCY_MS, LATENCY_MS], rate429: 0, rate503: 0 }),
    record: false,
  });
  try {
    return await fn(d, model);
  } finally {
    await model.close();
  }
}

async function viaBatchApi(ctx: RunContext): Promise<Measurement> {
  const n = ctx.n(50_000, 200);
  return withModel(async (d, model) => {
    const config = d.loadConfig({
      env: {},
      document: {
        url: ctx.dsn,
        concurrency: CONCURRENCY,
        batch_size: CONCURRENCY,
        health_port: -1,
        metrics_port: -1,
        queues: [{ queue_name: 'batch', igw_base_url: model.url, gates: [{ kind: 'concurrency', limit: CONCURRENCY }] }],
        batch_api: { port: 0, api_keys: [{ sha256: d.hashApiKey(KEY), tenant: 'bench' }] },
      },
    });
    const dispatcher = await d.Dispatcher.start({ config });
    try {
      const base = `http://127.0.0.1:${dispatcher.batchApiPort}/v1`;
      const auth = { authorization: `Bearer ${KEY}` };
      const text = Array.from({ length: n }, (_, i) => line(i)).join('\n') + '\n';
      const t0 = performance.now();
      const form = new FormData();
      form.set('purpose', 'batch');
      form.set('file', new Blob([text], { type: 'application/jsonl' }), 'input.jsonl');
      const file = await call<{ id: string }>(`${base}/files`, { method: 'POST', headers: auth, body: form });
      const created = await call<{ id: string }>(`${base}/batches`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      });
      let batch: { status: string; output_file_id: string | null; request_counts: { completed: number; failed: number } };
      for (;;) {
        batch = await call(`${base}/batches/${created.id}`, { headers: auth });
        if (['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      check(batch.status === 'completed', `q: the batch ended ${batch.status}`);
      check(batch.output_file_id !== null, 'q: the completed batch has no output file');
      const res = await fetch(`${base}/files/${batch.output_file_id}/content`, { headers: auth });
      check(res.ok, `q: the output download answered ${res.status}`);
      const output = await res.text();
      const s = (performance.now() - t0) / 1000;
      const seen = new Map<string, number>();
      for (const l of output.split('\n')) {
        if (l === '') continue;
        const o = JSON.parse(l) as { custom_id: string; response: { status_code: number } | null };
        check(o.response?.status_code === 200, `q: ${o.custom_id} answered ${o.response?.status_code ?? 'nothing'}`);
        seen.set(o.custom_id, (seen.get(o.custom_id) ?? 0) + 1);
      }
      check(seen.size === n && [...seen.values()].every((c) => c === 1), `q: ${seen.size} distinct custom_ids of ${n} in the output`);
      ctx.log(`${n} lines in ${s.toFixed(2)} s (upload to the output's last byte)`);
      return { rate: n / s };
    } finally {
      await dispatcher.stop();
    }
  });
}

async function rawLoop(ctx: RunContext): Promise<Measurement> {
  const n = ctx.n(50_000, 200);
  return withModel(async (_d, model) => {
    const url = new URL('/v1/chat/completions', model.url).href;
    let next = 0;
    let ok = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < n; i = next++) {
          const body = (JSON.parse(line(i)) as { body: unknown }).body;
          const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
          await res.arrayBuffer();
          if (res.status === 200) ok++;
        }
      }),
    );
    const s = (performance.now() - t0) / 1000;
    check(ok === n, `raw-loop: ${ok} of ${n} calls answered 200`);
    return { rate: n / s };
  });
}

async function call<T>(url: string, init: RequestInit): Promise<T> {
  const res = await fetch(url, init);
  const text = await res.text();
  check(res.ok, `${init.method ?? 'GET'} ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text) as T;
}
