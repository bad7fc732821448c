export { FaultProxy } from './proxy.js';
export { Proc, logDir, rng, sleep } from './procs.js';
export { deadTuples, pinVacuumHorizon, terminateBackends } from './pgfaults.js';
export { seedWorkload, spawnWorkload, waitDrained, workloadViolations, type Workload } from './workload.js';
export {
  DSN_PASSWORD,
  MALFORMED_PASSWORD_PARTS,
  PAYLOAD_SECRET,
  databaseNamedByPassword,
  dsnWithPassword,
  findSecrets,
  malformedPasswordDsns,
} from './secrets.js';
