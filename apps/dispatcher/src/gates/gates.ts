// The gate catalogue of docs/design/dispatcher.md#gates: budget gates (how much of a poll's batch may be
// dispatched: constant, endpoint-scrape, prometheus-query/-saturation/-budget), admission gates
// (per message: local-max-concurrency, tier-priority-admission) and combinators (composite,
// wait-on-refuse). Gates are built from `{ gate_type, gate_params }` without I/O, so a config is
// validated by building its gates once.
//
// This module is the factory and the entry point callers import; the gate families live in
// budget.ts, message-gates.ts and combinators.ts, the parameter checks in params.ts, the contract in types.ts.
import { QError, QErrorCode } from '@q/schema';
import { LocalMaxConcurrency, tierPriorityAdmission } from './message-gates.js';
import { budgetGate, endpointScrape, prometheusBudget, prometheusQuery, prometheusSaturation } from './budget.js';
import { composite, waitOnRefuse } from './combinators.js';
import { bad, gateSpec, Params } from './params.js';
import type { Gate, GateDeps, GateSpec } from './types.js';

export type { Gate, GateDeps, GateMessage, GateRelease, GateSpec, Verdict } from './types.js';

/** The gate types this dispatcher builds. */
export const GATE_TYPES = [
  'constant',
  'endpoint-scrape',
  'prometheus-query',
  'prometheus-saturation',
  'prometheus-budget',
  'local-max-concurrency',
  'tier-priority-admission',
  'composite',
  'wait-on-refuse',
] as const;

/** Where a gate runs: a queue gate decides in the handler before the quota gates, a pool gate in the pool worker. */
export type GateLevel = 'queue' | 'pool';

/**
 * Gate types that cannot work as (part of) a queue gate, and why. At queue level Wait behaves
 * like Continue, so `wait-on-refuse` would turn its inner gate's every refusal into a pass (12 in
 * flight against `local-max-concurrency` 2); and the queue gate runs before the quota gates set
 * `classification`, which `tier-priority-admission` reads.
 */
const POOL_ONLY: Readonly<Record<string, string>> = {
  'wait-on-refuse': 'turns every refusal into a pass at queue level (Wait is Continue there); use it as a pool gate',
  'tier-priority-admission': 'reads the classification the quota gates set after the queue gate; use it as a pool gate',
};

/**
 * Builds a gate. `at` names it in errors (`queues[0].gate_params`); `level` (default `pool`) is
 * where it runs. Throws `QError` `CONFIG` for an unknown type, an unknown or bad parameter, a
 * `prometheus-*` gate without `prometheus_url`, or a pool-only type in a queue gate.
 */
export function createGate(spec: GateSpec, deps: GateDeps, at: string, level: GateLevel = 'pool'): Gate {
  const type = spec.gate_type;
  if (level === 'queue' && Object.hasOwn(POOL_ONLY, type)) {
    throw new QError(QErrorCode.CONFIG, `config: ${at}.gate_type ${type} cannot be a queue gate: it ${POOL_ONLY[type]}`);
  }
  const params = spec.gate_params ?? {};
  const pAt = `${at}.gate_params`;
  switch (type) {
    case 'constant':
      new Params(pAt, params, []);
      return budgetGate(async () => 1);
    case 'endpoint-scrape':
      return endpointScrape(
        new Params(pAt, params, [
          'url',
          'metric',
          'labels',
          'max_count_per_pod',
          'capacity',
          'baseline',
          'threshold',
          'fallback',
          'pods_url',
          'pods_metric',
          'pods_labels',
          'pool',
        ]),
        deps,
      );
    case 'prometheus-query':
      return prometheusQuery(new Params(pAt, params, ['query', 'fallback', 'pool']), deps, at);
    case 'prometheus-saturation':
      return prometheusSaturation(new Params(pAt, params, ['pool', 'namespace', 'threshold', 'fallback']), deps, at);
    case 'prometheus-budget':
      return prometheusBudget(new Params(pAt, params, ['pool', 'namespace', 'max_concurrency', 'baseline', 'fallback']), deps, at);
    case 'local-max-concurrency': {
      const p = new Params(pAt, params, ['limit', 'gating_mode']);
      const limit = p.num('limit', undefined, 1);
      const mode = p.str('gating_mode', 'classifying');
      if (mode !== 'classifying' && mode !== 'blocking') throw bad(pAt, 'gating_mode must be "classifying" or "blocking"');
      return new LocalMaxConcurrency(Math.floor(limit), mode === 'blocking');
    }
    case 'tier-priority-admission': {
      const p = new Params(pAt, params, ['saturation_gate', 'saturation_gate_params', 'tier_label']);
      const inner = createGate(
        { gate_type: p.str('saturation_gate'), gate_params: p.p.saturation_gate_params as Record<string, unknown> | undefined },
        deps,
        `${pAt}.saturation_gate`,
        level,
      );
      return tierPriorityAdmission(inner, p.str('tier_label', 'tier'));
    }
    case 'composite': {
      const p = new Params(pAt, params, ['gates']);
      const list = p.p.gates ?? [];
      if (!Array.isArray(list)) throw bad(pAt, 'gates must be an array of { gate_type, gate_params }');
      return composite(list.map((g, i) => createGate(gateSpec(g, `${pAt}.gates[${i}]`), deps, `${pAt}.gates[${i}]`, level)));
    }
    case 'wait-on-refuse': {
      const p = new Params(pAt, params, ['gate']);
      return waitOnRefuse(createGate(gateSpec(p.p.gate, `${pAt}.gate`), deps, `${pAt}.gate`, level));
    }
    default:
      throw new QError(QErrorCode.CONFIG, `config: ${at}.gate_type must be one of ${GATE_TYPES.map((t) => JSON.stringify(t)).join(', ')}`);
  }
}
