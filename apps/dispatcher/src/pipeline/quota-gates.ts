// The quota gates of a queue (docs/design/dispatcher.md#gates: concurrency and rate keys from the
// request's metadata, held through @q/quota): acquire all or none, and park a refused request
// until a slot of its key frees up. The parking state (who waits on which key) lives as long as
// the handler, not one request.
import type { GateConfig } from '../config/schema.js';
import { isQError, QErrorCode } from '@q/schema';
import { cancelledResult, errorResult, type Envelope } from '../formats.js';
import { errInfo } from '../logger.js';
import { CANCEL_CHECK_THROTTLE_MS, nowSec, type HandlerContext } from './handler-context.js';
import type { Outcome, QueuedRequest, Release } from './ports.js';

/** A concurrency slot held by a request. */
export interface Held {
  key: string;
  release: Release;
  /** When the slot was acquired (ms): its hold time sizes how fast parked requests come back. */
  since: number;
}

/** The quota gates of one queue's handler. */
export interface QuotaGates {
  /** Whether the queue has any quota gate. */
  readonly active: boolean;
  /** Acquires every gate (waiting up to the gates' `wait_ms`), or ends the request with an outcome. */
  pass(req: QueuedRequest, env: Envelope, labels: Record<string, string>): Promise<Held[] | Outcome>;
  /** Gives the slots back (asynchronously; never throws) and wakes who waits on them. */
  releaseAll(held: Held[]): void;
}

/** Builds the quota gates of `ctx.deps.queue`. Throws when the queue has gates but no quota client. */
export function createQuotaGates(ctx: HandlerContext): QuotaGates {
  const { deps, finish, atDeadline, backToPending, checkCancelled } = ctx;
  const { queue, metrics, logger } = deps;
  // Concurrency gates first: waiting for a slot must not burn rate admissions.
  const gates = [...queue.gates].sort((a, b) => (a.kind === b.kind ? 0 : a.kind === 'concurrency' ? -1 : 1));
  if (gates.length > 0 && !deps.quota) throw new Error(`queue ${queue.queue_name}: gates need a quota client`);

  // Requests parked at a concurrency gate wake as soon as a slot of their key is released here
  // (the timer covers releases by other dispatchers).
  const parked = new Map<string, Set<() => void>>();
  const wake = (key: string) => {
    for (const w of parked.get(key) ?? []) w();
  };
  const releaseAll = (held: Held[]) => {
    for (const h of held.splice(0)) {
      // Requests of the key held back by admission: the slot goes straight to the next of them.
      if (deps.load?.keep(h.key, h.release, Date.now() - h.since)) {
        wake(h.key);
        continue;
      }
      void Promise.resolve()
        .then(() => h.release())
        .catch(() => undefined) // a failed release retires the holder inside Quota
        .then(() => {
          deps.load?.released(h.key, Date.now() - h.since);
          wake(h.key);
        });
    }
  };
  const refuse = (held: Held[], key: string): { refused: string } => {
    deps.load?.refused(key);
    releaseAll(held);
    return { refused: key };
  };

  /** Acquires every gate or none. A refusal or an error leaves nothing held. */
  async function tryGates(env: Envelope, labels: Record<string, string>): Promise<Held[] | { refused: string } | { invalid: string } | 'error'> {
    const held: Held[] = [];
    const quota = deps.quota;
    if (!quota) return held; // no gates: createQuotaGates refuses gates without a quota client
    for (const g of gates) {
      const value = env.data.metadata?.[g.attribute];
      if (!value) continue; // no key → not gated (docs/design/dispatcher.md#gates)
      const key = `${g.prefix}${g.attribute}:${value}`;
      try {
        if (g.gating_mode === 'classifying') {
          // Never blocks (docs/design/dispatcher.md#gates): a granted slot is held and labels the request reserved.
          const release = await quota.acquire(key, g.limit);
          labels.classification = release === null ? 'overflow' : 'reserved';
          if (release !== null) {
            deps.load?.acquired(key);
            held.push({ key, release, since: Date.now() });
          }
          continue;
        }
        if (g.kind === 'concurrency') {
          const release = deps.load?.take(key) ?? (await quota.acquire(key, g.limit));
          if (release === null) return refuse(held, key);
          deps.load?.acquired(key);
          held.push({ key, release, since: Date.now() });
        } else if (!(await quota.admit(key, g.limit, g.window_ms))) {
          return refuse(held, key);
        }
      } catch (err) {
        releaseAll(held);
        // The quota refused the key or limit itself: asking again cannot help (issue 35 item 2).
        if (isQError(err, QErrorCode.INVALID_ARGUMENT)) return { invalid: err.message };
        logger.warn({ queue: queue.queue_name, ...errInfo(err) }, 'quota gate error');
        return 'error';
      }
    }
    return held;
  }

  async function pass(req: QueuedRequest, env: Envelope, labels: Record<string, string>): Promise<Held[] | Outcome> {
    const waitMs = Math.max(0, ...gates.map((g: GateConfig) => g.wait_ms));
    const started = Date.now();
    let delay = 100;
    let counted = false;
    let lastCancelCheck = Date.now();
    // The key this request waits on (its slots held by other dispatchers), counted in the
    // admission's view while it waits, so the dispatch hands over no more than can use a slot
    // (see KeyLoad.saturated).
    let waitingOn: string | undefined;
    const stopWaiting = () => {
      if (waitingOn !== undefined) deps.load?.waitEnded(waitingOn);
      waitingOn = undefined;
    };
    try {
      for (;;) {
        const r = await tryGates(env, labels);
        if (Array.isArray(r)) return r;
        if (r === 'error') {
          metrics.gateDecision('error');
          return backToPending();
        }
        if ('invalid' in r) return finish(env, req, errorResult(req.id, 'INVALID_REQUEST', `quota gate: ${r.invalid}`));
        if (!counted) metrics.gateDecision('quota_exhausted');
        counted = true;
        const now = Date.now();
        if (now >= req.deadline * 1000) return atDeadline(env, req);
        if (now - started >= waitMs || deps.stopping?.aborted) return backToPending();
        if (now - lastCancelCheck >= CANCEL_CHECK_THROTTLE_MS) {
          lastCancelCheck = now;
          const c = await checkCancelled(req);
          if (c === 'error') return { retryAt: Math.ceil(nowSec() + 1) };
          if (c) return finish(env, req, cancelledResult(req.id));
        }
        const sleep = Math.min(delay * (0.5 + ctx.random() / 2), started + waitMs - now, req.deadline * 1000 - now);
        if (waitingOn !== r.refused) {
          stopWaiting();
          waitingOn = r.refused;
          deps.load?.waitStarted(r.refused);
        }
        await parkUntil(parked, r.refused, Math.max(1, sleep), deps.stopping);
        delay = Math.min(1000, delay * 2);
      }
    } finally {
      stopWaiting();
    }
  }

  return { active: gates.length > 0, pass, releaseAll };
}

/** Sleeps `ms`, or less: until a slot of `key` is released here, or `signal` aborts. */
function parkUntil(parked: Map<string, Set<() => void>>, key: string, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    let set = parked.get(key);
    if (!set) parked.set(key, (set = new Set()));
    set.add(done);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      const s = parked.get(key);
      s?.delete(done);
      if (s?.size === 0) parked.delete(key);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
