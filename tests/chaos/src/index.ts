export { FaultProxy } from './proxy.js';
export { Proc, logDir, rng, sleep } from './procs.js';
export { deadTuples, pinVacuumHorizon, terminateBackends } from './pgfaults.js';
