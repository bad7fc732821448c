export type { FromPoolOptions, OpenOptions } from './options.js';
export { drizzleClient, type InTransaction, type TransactionClient } from './transaction.js';
export * from './requests/index.js';
export * from './jobs/index.js';
