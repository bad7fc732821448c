export { Consumer, type ConsumerOptions, type ConsumerState } from './consumer.js';
export {
  defaultOwner,
  runPartitionWorker,
  type HandlerFailure,
  type Outcome,
  type PartitionWorkerOptions,
  type PartitionWorkerStats,
} from './runner/run.js';
export { MAX_PERSISTENT_FAILURES, type PartitionWorkerFailure } from './runner/options.js';
export { silentLogger, type Logger } from './logger.js';
