// An OpenAI-compatible inference endpoint on loopback: the simulated endpoint of the embedded
// default (random latency, 429-with-Retry-After and 503 rates) and the fake server of the tests
// (scripted faults). It counts concurrent calls per tenant (fairness header) so callers can check
// the gates from the endpoint's side.
import http from 'node:http';
import { listenOnLoopback } from './listen.js';

/** One call as the endpoint saw it. */
export interface Call {
  /** Arrival, ms since epoch. */
  at: number;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The raw body text. */
  body: string;
  /** Fairness id (`x-llm-d-inference-fairness-id`), or "". */
  tenant: string;
}

/** What the endpoint does with a call. */
export type Action =
  | {
      status: number;
      body?: string;
      headers?: Record<string, string>;
      delayMs?: number;
      /**
       * Send only the first `bytes` of the body (the head announces all of it), then stall for
       * ever (`stall`) or reset the connection (`reset`): a response that never finishes.
       */
      partial?: { bytes: number; then: 'stall' | 'reset' };
    }
  /** Destroys the socket after `delayMs` without a response (connection reset). */
  | { reset: true; delayMs?: number };

/** Chooses the action for a call (the nth call overall, from 0). */
export type Behaviour = (call: Call, n: number) => Action | Promise<Action>;

/** A running endpoint. */
export interface InferenceServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Every call so far, in arrival order. */
  readonly calls: Call[];
  /** Highest number of concurrent calls seen per tenant. */
  readonly peak: Map<string, number>;
  /** Concurrent calls now, per tenant. */
  readonly current: Map<string, number>;
  /** Replaces the behaviour (tests switch faults mid-run). */
  setBehaviour(b: Behaviour): void;
  close(): Promise<void>;
}

/** Options of {@link startInferenceServer}. */
export interface InferenceServerOptions {
  port?: number;
  behaviour?: Behaviour;
  /** Header carrying the tenant (default `x-llm-d-inference-fairness-id`). */
  tenantHeader?: string;
  /** Keep the call log (default true; the demo turns it off). */
  record?: boolean;
}

/** An OpenAI-style completion body. */
export function completionBody(text = 'ok', promptTokens = 5, completionTokens = 2): string {
  return JSON.stringify({
    id: `cmpl-${Math.random().toString(36).slice(2, 10)}`,
    object: 'text_completion',
    created: Math.floor(Date.now() / 1000),
    model: 'sim',
    choices: [{ index: 0, text, finish_reason: 'stop' }],
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  });
}

/** Parameters of the simulated endpoint. */
export interface SimulationOptions {
  /** Latency range, ms (uniform). Default 20–80. */
  latencyMs?: [number, number];
  /** Share of calls answered 429 with `Retry-After` (default 0.03). */
  rate429?: number;
  /** Share of calls answered 503 (default 0.02). */
  rate503?: number;
  /** `Retry-After` seconds on 429s (default 1). */
  retryAfterSeconds?: number;
  random?: () => number;
}

/** The behaviour of the simulated endpoint: latency, then 429 / 503 / 200 at the given rates. */
export function simulated(opts: SimulationOptions = {}): Behaviour {
  const [lo, hi] = opts.latencyMs ?? [20, 80];
  const r429 = opts.rate429 ?? 0.03;
  const r503 = opts.rate503 ?? 0.02;
  const rnd = opts.random ?? Math.random;
  return () => {
    const delayMs = lo + rnd() * Math.max(0, hi - lo);
    const x = rnd();
    if (x < r429) {
      return {
        status: 429,
        delayMs: delayMs / 4,
        headers: { 'retry-after': String(opts.retryAfterSeconds ?? 1) },
        body: JSON.stringify({ error: 'Too Many Requests' }),
      };
    }
    if (x < r429 + r503) return { status: 503, delayMs: delayMs / 4, body: JSON.stringify({ error: 'Service Unavailable' }) };
    return { status: 200, delayMs, body: completionBody() };
  };
}

/** Starts the endpoint on 127.0.0.1. */
export async function startInferenceServer(opts: InferenceServerOptions = {}): Promise<InferenceServer> {
  let behaviour: Behaviour = opts.behaviour ?? simulated();
  const tenantHeader = (opts.tenantHeader ?? 'x-llm-d-inference-fairness-id').toLowerCase();
  const record = opts.record ?? true;
  const calls: Call[] = [];
  const peak = new Map<string, number>();
  const current = new Map<string, number>();
  let n = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const th = req.headers[tenantHeader];
      const call: Call = {
        at: Date.now(),
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        tenant: (Array.isArray(th) ? th[0] : th) ?? '',
      };
      if (record) calls.push(call);
      const now = (current.get(call.tenant) ?? 0) + 1;
      current.set(call.tenant, now);
      if (now > (peak.get(call.tenant) ?? 0)) peak.set(call.tenant, now);
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        current.set(call.tenant, (current.get(call.tenant) ?? 1) - 1);
      };
      res.on('close', finish);
      Promise.resolve(behaviour(call, n++))
        .then((action) => {
          const act = () => {
            if ('reset' in action) {
              finish();
              req.socket.destroy();
              return;
            }
            const body = action.body ?? '';
            // Count the call as over before the client can see the response.
            finish();
            res.writeHead(action.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...action.headers });
            if (action.partial) {
              res.write(Buffer.from(body).subarray(0, action.partial.bytes));
              if (action.partial.then === 'reset') setTimeout(() => req.socket.destroy(), 20);
              return;
            }
            res.end(body);
          };
          if (action.delayMs && action.delayMs > 0) setTimeout(act, action.delayMs);
          else act();
        })
        .catch(() => {
          finish();
          res.writeHead(500).end('behaviour failed');
        });
    });
  });
  const listening = await listenOnLoopback(server, opts.port);
  return {
    url: listening.url,
    calls,
    peak,
    current,
    setBehaviour(b) {
      behaviour = b;
    },
    close: () => listening.close(),
  };
}
