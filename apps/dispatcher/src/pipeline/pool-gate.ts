// The pool gate loop (docs/design/dispatcher.md#gates): after a worker of the pool is free, the
// pool's gate says Continue, Wait (asked again with backoff, up to `gateWaitTimeoutMs` or the
// deadline), Refuse or Drop. Unlike the quota gates, it waits on a gate's verdict rather than on a
// quota key.
import { errorResult, type Envelope } from '../formats.js';
import type { GateMessage, GateRelease, Verdict } from '../gates/gates.js';
import { dropResult, type HandlerContext } from './handler-context.js';
import type { Outcome, QueuedRequest } from './ports.js';

/** The pool-gate loop; `undefined` = admitted (releases pushed to `releases`). Call only with `deps.poolGate` set. */
export async function passPoolGate(
  ctx: HandlerContext,
  req: QueuedRequest,
  env: Envelope,
  msg: GateMessage,
  releases: GateRelease[],
  signal?: AbortSignal,
): Promise<Outcome | undefined> {
  const { deps, finish, atDeadline, backToPending } = ctx;
  const gate = deps.poolGate;
  if (!gate) return undefined; // called only with a pool gate
  const pm = deps.poolMetrics ?? deps.metrics;
  const started = Date.now();
  const waitMs = deps.gateWaitTimeoutMs ?? 300_000;
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  deps.stopping?.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(onAbort, Math.max(0, Math.min(waitMs > 0 ? waitMs : Infinity, req.deadline * 1000 - Date.now(), 2_147_483_647)));
  let delay = 100;
  let counted = false;
  try {
    for (;;) {
      let v: Verdict;
      try {
        v = await gate.apply(msg, releases, ac.signal);
      } catch (err) {
        if (Date.now() >= req.deadline * 1000) return atDeadline(env, req);
        if (ac.signal.aborted) return backToPending(); // stop, lease lost or gate-wait timeout
        pm.gateDecision('error');
        return finish(env, req, errorResult(req.id, 'GATE_ERROR', `Pool gating error: ${(err as Error).message}`));
      }
      if (v.kind === 'continue') return undefined;
      if (v.kind === 'refuse') {
        pm.gateDecision(v.overflow ? 'quota_exhausted' : 'gate_closed');
        return backToPending();
      }
      if (v.kind === 'drop') {
        pm.gateDecision('dropped');
        return finish(env, req, dropResult(req.id, v));
      }
      if (!counted) pm.gateDecision('gate_closed');
      counted = true;
      const now = Date.now();
      if (now >= req.deadline * 1000) return atDeadline(env, req);
      if (ac.signal.aborted || (waitMs > 0 && now - started >= waitMs)) return backToPending();
      await sleep(Math.min(delay * (0.5 + ctx.random() / 2), req.deadline * 1000 - now), ac.signal);
      delay = Math.min(1000, delay * 2);
    }
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    deps.stopping?.removeEventListener('abort', onAbort);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, Math.max(1, ms));
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
