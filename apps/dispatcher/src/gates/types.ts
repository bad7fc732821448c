// The gate contract (docs/design/dispatcher.md#gates) on its own, so the gate families (budget.ts,
// message-gates.ts, combinators.ts) and the factory (gates.ts) share it without importing each other.
import type { ResultMessage } from '../formats.js';
import type { GateMetrics } from './metrics.js';
import type { MetricSources } from './sources.js';

/** What a gate decides for one message. */
export type Verdict =
  | { kind: 'continue' }
  /** Back to the queue (no result); `overflow`: refused by a quota, counted as `quota_exhausted`. */
  | { kind: 'refuse'; overflow?: boolean }
  /** Park in memory and ask again (pool gates); at queue level it behaves like `continue`. */
  | { kind: 'wait' }
  /** Final: the given result, else `GATE_DROPPED`. */
  | { kind: 'drop'; result?: Omit<ResultMessage, 'id'> };

/** The message as a gate sees it. */
export interface GateMessage {
  id: string;
  metadata?: Record<string, string>;
  /** Queue labels merged with framework labels (`classification` = `reserved` | `overflow`). */
  labels: Record<string, string>;
}

/** Gives back what an `apply` acquired. */
export type GateRelease = () => void;

/** A gate (docs/design/dispatcher.md#gates). */
export interface Gate {
  /** Capacity fraction in [0, 1]; never rejects (a failing source falls back). */
  budget(): Promise<number>;
  /** Per-message decision; may push release closures (run when the message is finished). */
  apply(msg: GateMessage, releases: GateRelease[], signal?: AbortSignal): Promise<Verdict>;
}

/** `{ gate_type, gate_params }` as configured. */
export interface GateSpec {
  gate_type: string;
  gate_params?: Record<string, unknown>;
}

/** What building a gate needs. */
export interface GateDeps {
  sources: MetricSources;
  /** Whether `prometheus_url` is configured (the `prometheus-*` gates need it). */
  hasPrometheus: boolean;
  metrics?: GateMetrics;
}

/** The verdict shared by every gate that lets a message through. */
export const CONTINUE: Verdict = { kind: 'continue' };

/** Clamps a budget into [0, 1]; a non-finite value (NaN from a bad source) counts as 0. */
export const clamp = (x: number): number => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0);
