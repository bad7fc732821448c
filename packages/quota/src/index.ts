export { QuotaStore } from './store.js';
export { Quota, createQuota, type QuotaFailure, type QuotaOptions, type Release } from './client/quota.js';
export type { FromPoolOptions, OpenOptions, TelemetryOptions } from './options.js';
export { silentLogger, type Logger } from './logger.js';
export { QError, QErrorCode, QuotaHolderLapsedError, isQError } from '@q/schema';
