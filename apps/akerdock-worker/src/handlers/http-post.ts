import { Agent, request, type Dispatcher } from 'undici';
import type { Job, StepRecorder } from '../job-types.js';
import { ATTEMPT_HEADER, IDEMPOTENCY_HEADER, SIGNATURE_HEADER, signWebhook } from '../signing.js';
import { GiveUpError } from './give-up.js';

/** How a delivery attempt ended, from the receiver's answer. */
export type DeliveryVerdict = 'delivered' | 'retry' | 'give_up';

/**
 * The webhook rule: 2xx delivered; 4xx except 408 (timeout) and 429 (slow down) will never
 * succeed as sent, so give up at once; anything else (5xx, 3xx, 1xx) is worth retrying.
 */
export function classifyStatus(status: number): DeliveryVerdict {
  if (status >= 200 && status < 300) return 'delivered';
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return 'give_up';
  return 'retry';
}

/** Outcome of one signed POST. `status` is absent when no answer arrived (network error, timeout). */
export interface PostOutcome {
  verdict: DeliveryVerdict;
  status?: number;
  durationMs: number;
  /** Human-readable cause, never the body. */
  detail: string;
}

/** A keep-alive connection pool shared by every delivery of the process. */
export const sharedAgent: Dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: 128 });

/** Options of {@link signedPost}. */
export interface SignedPostOptions {
  url: string;
  body: string;
  secret: string | undefined;
  idempotencyKey: string;
  attempt: number;
  timeoutMs: number;
  signal: AbortSignal;
  headers?: Record<string, string>;
  dispatcher?: Dispatcher;
}

/**
 * POSTs `body` (already-serialised JSON) to `url` with the signature, idempotency and attempt
 * headers, bounded by `timeoutMs` and by `signal`. Never throws for an HTTP or network failure:
 * the verdict says what to do. The response body is discarded (never logged or stored).
 */
export async function signedPost(opts: SignedPostOptions): Promise<PostOutcome> {
  const headers: Record<string, string> = {
    ...opts.headers,
    'content-type': 'application/json',
    'user-agent': 'q-akerdock-worker',
    [IDEMPOTENCY_HEADER]: opts.idempotencyKey,
    [ATTEMPT_HEADER]: String(opts.attempt),
  };
  if (opts.secret !== undefined) headers[SIGNATURE_HEADER] = signWebhook(opts.secret, opts.body, Math.floor(Date.now() / 1000));
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  try {
    const res = await request(opts.url, {
      method: 'POST',
      body: opts.body,
      headers,
      signal: AbortSignal.any([opts.signal, timeout]),
      dispatcher: opts.dispatcher ?? sharedAgent,
    });
    await res.body.dump().catch(() => undefined);
    const verdict = classifyStatus(res.statusCode);
    return { verdict, status: res.statusCode, durationMs: elapsed(), detail: `HTTP ${res.statusCode}` };
  } catch (err) {
    if (opts.signal.aborted) throw err; // the worker is stopping or lost the lease: not a verdict
    const detail = timeout.aborted ? `no answer within ${opts.timeoutMs} ms` : `request failed: ${errorCode(err)}`;
    return { verdict: 'retry', durationMs: elapsed(), detail };
  }
}

/** The step {@link deliverAsStep} records, and what it says in its errors: `<op>: receiver refused the <what>: …`. */
export interface DeliveryNames {
  /** The name of the step the delivery is, e.g. `deliver`. */
  step: string;
  /** The job kind, e.g. `webhook.deliver`. */
  op: string;
  /** What was delivered, e.g. `delivery`. */
  what: string;
}

/**
 * The delivery of a job as its step `names.step` (started here): one {@link signedPost} to
 * `opts.url`, signed, with the job uuid as the idempotency key. Delivered: the step succeeds and
 * the outcome is returned. Otherwise the step fails and the job gives up (the receiver refused
 * it) or throws to be retried.
 */
export async function deliverAsStep(
  job: Pick<Job, 'uuid' | 'attempt'>,
  steps: Pick<StepRecorder, 'start' | 'succeed' | 'fail'>,
  names: DeliveryNames,
  opts: Omit<SignedPostOptions, 'idempotencyKey' | 'attempt'>,
): Promise<PostOutcome> {
  await steps.start(names.step);
  const out = await signedPost({ ...opts, idempotencyKey: job.uuid, attempt: job.attempt });
  const summary = `${out.detail} after ${out.durationMs} ms (attempt ${job.attempt})`;
  if (out.verdict === 'delivered') {
    await steps.succeed(summary);
    return out;
  }
  await steps.fail(summary);
  if (out.verdict === 'give_up') throw new GiveUpError(`${names.op}: receiver refused the ${names.what}: ${out.detail}`);
  throw new Error(`${names.op}: ${out.detail}; will retry`);
}

/** A short, payload-free description of a network error. */
function errorCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown }; name?: unknown };
  return String(e.code ?? e.cause?.code ?? e.name ?? 'error');
}
