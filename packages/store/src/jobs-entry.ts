// `@q/store/jobs`: the durable job store alone. Importing it loads no request-queue module (and no
// drizzle-orm), so a job-queue user pays only for the job queue (test/entries.test.ts checks it).
export type { FromPoolOptions, OpenOptions } from './options.js';
export { drizzleClient, type InTransaction, type TransactionClient } from './transaction.js';
export * from './jobs/index.js';
