// A simulated model server that behaves like vLLM under load: it runs at most `capacity`
// requests at once (max_num_seqs), queues the rest FIFO, serves each in a time that grows with
// the batch it joins, and publishes vLLM's gauges on `/metrics` (`vllm:num_requests_running`,
// `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`). Its own saturation (requests held ÷
// capacity) is sampled at every arrival, so a test can check a gate from the server's side.
import http from 'node:http';
import { listenOnLoopback } from './listen.js';
import { completionBody } from './server.js';

/** Options of {@link startModelServer}. */
export interface ModelServerOptions {
  /** Requests served at once; the rest wait (default 64). */
  capacity?: number;
  /** Service time of a request joining an empty batch, ms (uniform; default 80–100). */
  latencyMs?: [number, number];
  /** Service time grows by this factor × running ÷ capacity (default 0.3: +24 % at 0.8). */
  slowdown?: number;
  port?: number;
  random?: () => number;
}

/** A point of the saturation timeline. */
export interface SaturationPoint {
  /** ms since the server started. */
  t: number;
  /** Held ÷ capacity (running + waiting). */
  saturation: number;
}

/** A running model server. */
export interface ModelServer {
  readonly url: string;
  readonly capacity: number;
  /** Requests running / waiting now. */
  running(): number;
  waiting(): number;
  /** Highest saturation seen at an arrival since the last {@link ModelServer.resetStats}. */
  maxSaturation(): number;
  /** Saturation every 100 ms since the last reset (the demo's chart). */
  timeline(): SaturationPoint[];
  /** Requests answered since the last reset. */
  served(): number;
  resetStats(): void;
  close(): Promise<void>;
}

/** Starts the model server on 127.0.0.1. */
export async function startModelServer(opts: ModelServerOptions = {}): Promise<ModelServer> {
  const capacity = opts.capacity ?? 64;
  const [lo, hi] = opts.latencyMs ?? [80, 100];
  const slowdown = opts.slowdown ?? 0.3;
  const rnd = opts.random ?? Math.random;
  let running = 0;
  const queue: Array<() => void> = [];
  let maxSat = 0;
  let served = 0;
  let started = Date.now();
  let points: SaturationPoint[] = [];
  const sat = () => (running + queue.length) / capacity;
  const sampler = setInterval(() => {
    if (points.length < 100_000) points.push({ t: Date.now() - started, saturation: sat() });
  }, 100);
  sampler.unref();

  const begin = (respond: () => void) => {
    running++;
    const ms = (lo + rnd() * Math.max(0, hi - lo)) * (1 + (slowdown * (running - 1)) / capacity);
    setTimeout(() => {
      running--;
      served++;
      respond();
      const next = queue.shift();
      if (next) begin(next);
    }, ms);
  };

  const metricsText = () =>
    [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      `vllm:num_requests_running{model_name="sim"} ${running}`,
      '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
      '# TYPE vllm:num_requests_waiting gauge',
      `vllm:num_requests_waiting{model_name="sim"} ${queue.length}`,
      '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
      '# TYPE vllm:kv_cache_usage_perc gauge',
      `vllm:kv_cache_usage_perc{model_name="sim"} ${running / capacity}`,
      '',
    ].join('\n');

  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(metricsText());
      return;
    }
    req.resume();
    req.on('end', () => {
      const respond = () => {
        const body = completionBody('sim');
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
      };
      if (running < capacity) begin(respond);
      else queue.push(respond);
      maxSat = Math.max(maxSat, sat());
    });
  });
  const listening = await listenOnLoopback(server, opts.port);
  return {
    url: listening.url,
    capacity,
    running: () => running,
    waiting: () => queue.length,
    maxSaturation: () => maxSat,
    timeline: () => points,
    served: () => served,
    resetStats() {
      maxSat = sat();
      served = 0;
      started = Date.now();
      points = [];
    },
    close: () => {
      clearInterval(sampler);
      return listening.close();
    },
  };
}

/** Latency percentiles of a steady stream of requests sent straight to a server. */
export class Probe {
  readonly #latencies: number[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  /** Sends one interactive request to `url` every `everyMs`. */
  start(url: string, everyMs = 20): void {
    const target = new URL('/v1/completions', url);
    const body = JSON.stringify({ model: 'sim', prompt: 'interactive', max_tokens: 4 });
    this.#timer = setInterval(() => {
      const t0 = performance.now();
      const r = http.request(target, { method: 'POST', agent: this.#agent, headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => this.#latencies.push(performance.now() - t0));
      });
      r.on('error', () => undefined);
      r.end(body);
    }, everyMs);
  }

  /** Stops and returns the latencies (ms) and their p50 / p99. */
  stop(): { count: number; p50: number; p99: number } {
    clearInterval(this.#timer);
    this.#agent.destroy();
    const s = [...this.#latencies].sort((a, b) => a - b);
    const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
    return { count: s.length, p50: at(0.5), p99: at(0.99) };
  }
}
