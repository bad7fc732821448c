import type { Scenario } from '../scenario.js';
import { jobDrain, jobEnqueueBatch, jobEnqueueSingle, jobLatency } from './jobs.js';
import { otelDispatchAck, otelJobDrain } from './otel.js';
import { quotaAcquire, quotaAdmit } from './quota.js';
import { requestDispatchAck, requestEnqueue } from './requests.js';

/** Every scenario, in the order a full run executes them. */
export function allScenarios(): Scenario[] {
  return [
    jobEnqueueSingle(),
    jobEnqueueBatch(),
    jobDrain(8),
    jobDrain(32),
    jobLatency(),
    requestEnqueue(),
    requestDispatchAck(1),
    requestDispatchAck(4),
    quotaAdmit(1),
    quotaAdmit(1000),
    quotaAcquire(1),
    quotaAcquire(1000),
    otelJobDrain(),
    otelDispatchAck(),
  ];
}

/** Scenarios named (or prefixed) by `wanted`; all of them when `wanted` is empty. */
export function selectScenarios(wanted: string[]): Scenario[] {
  const all = allScenarios();
  if (wanted.length === 0) return all;
  const picked = all.filter((s) => wanted.some((w) => s.name === w || s.name.startsWith(w)));
  const unknown = wanted.filter((w) => !all.some((s) => s.name === w || s.name.startsWith(w)));
  if (unknown.length > 0) {
    throw new Error(`unknown scenario(s): ${unknown.join(', ')}; known: ${all.map((s) => s.name).join(', ')}`);
  }
  return picked;
}
