// `@q/store/requests`: the partitioned request queue alone (no job-store module is loaded).
export type { FromPoolOptions, OpenOptions } from './options.js';
export { drizzleClient, type InTransaction, type TransactionClient } from './transaction.js';
export * from './requests/index.js';
