import type { Scenario } from '../scenario.js';
import { batch50k } from './batch.js';
import { dispatchDemo, dispatchSaturated } from './dispatch.js';
import { flowChain, flowFanout } from './flows.js';
import { jobGroupsFair, jobGroupsLimit } from './groups.js';
import { jobDrain, jobEnqueue, jobLatency, jobWorkMany } from './jobs.js';
import { jobDrainHeldXmin, jobDrainRetained } from './jobs-history.js';
import { otelDispatchAck, otelJobDrain } from './otel.js';
import { partitionNewcomer, partitionRedelivery, partitionRunnersProcs } from './partition.js';
import { quotaAcquire, quotaAcquireProcs, quotaAdmit, quotaAdmitProcs } from './quota.js';
import { requestDispatchAck, requestEnqueue } from './requests.js';
import { scheduleTick } from './schedules.js';

/** Every scenario, in the order a full run executes them. */
export function allScenarios(): Scenario[] {
  return [
    jobEnqueue(),
    jobDrain(8),
    jobDrain(32),
    jobLatency(),
    jobWorkMany(),
    jobDrainRetained(),
    jobDrainHeldXmin(),
    jobGroupsLimit(),
    jobGroupsFair(),
    flowFanout(),
    flowChain(),
    requestEnqueue(),
    requestDispatchAck(1),
    requestDispatchAck(2),
    requestDispatchAck(4),
    quotaAdmit(1),
    quotaAdmit(1000),
    quotaAcquire(1),
    quotaAcquire(1000),
    quotaAdmitProcs(1),
    quotaAdmitProcs(1000),
    quotaAcquireProcs(1),
    quotaAcquireProcs(1000),
    otelJobDrain(),
    otelDispatchAck(),
    partitionNewcomer(),
    partitionRedelivery(),
    partitionRunnersProcs(1),
    partitionRunnersProcs(2),
    partitionRunnersProcs(4),
    dispatchDemo(),
    batch50k(),
    dispatchSaturated(1, 8, 200, 400),
    dispatchSaturated(40, 1, 200, 25),
    scheduleTick(1),
    scheduleTick(4),
    scheduleTick(8),
  ];
}

/**
 * Scenarios named (or prefixed) by `wanted`; all of them when `wanted` is empty — in a smoke run,
 * all but those whose code a sibling already runs.
 */
export function selectScenarios(wanted: string[], smoke = false): Scenario[] {
  const all = allScenarios();
  if (wanted.length === 0) return smoke ? all.filter((s) => !s.smokeCoveredBy && !s.smokeWaitsFor) : all;
  const picked = all.filter((s) => wanted.some((w) => s.name === w || s.name.startsWith(w)));
  const unknown = wanted.filter((w) => !all.some((s) => s.name === w || s.name.startsWith(w)));
  if (unknown.length > 0) {
    throw new Error(`unknown scenario(s): ${unknown.join(', ')}; known: ${all.map((s) => s.name).join(', ')}`);
  }
  return picked;
}
