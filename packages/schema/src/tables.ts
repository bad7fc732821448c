export * from './tables/requests.js';
export * from './tables/quota.js';
export * from './tables/jobs.js';
