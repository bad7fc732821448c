export { createTestSchema, dsnWithSchema, type TestSchema } from './schema.js';
export { acquireServer, releaseServer, type ServerSource } from './server.js';
export { runWorkerUntil, sleep, waitFor, type RunnableWorker, type Truthy, type WaitForOptions } from './wait.js';
export { spawnTs, TS_NODE_ARGS, type Exit, type SpawnTsOptions, type TsProcess } from './spawn.js';
export {
  useFromPool,
  useJobStore,
  useOpenStore,
  useQuotaStore,
  useSchemaPerTest,
  useStore,
  type ClosableStore,
  type PoolStoreClass,
  type SchemaAndPool,
  type SchemaPerTest,
  type StoreClass,
  type UsedPoolStore,
  type UsedStore,
  type UseStoreKitOptions,
} from './lifecycle.js';
export { idInPartition, ids, newJob, newRequest, newRequests, token, type RequestInput } from './factories.js';
export { inTransaction } from './transaction.js';
export { onOneConnection, testDatabaseUrl, withClient } from './client.js';
export { memoryLogger, type LogLine, type MemoryLogger } from './logger.js';
export { testRoles, type TestRoles } from './roles.js';
export { migrateAsOlderBuild, useScratchSchemas, type SchemaNaming, type ScratchSchemas, type ShippedMigration } from './older-build.js';
export { runUnderTerminal, stripAnsi, textSink, type RunUnderTerminalOptions, type TerminalRun, type TextSink } from './terminal.js';
export { thrownBy } from './thrown.js';
export { buildIfStale, newestMtime } from './build.js';
