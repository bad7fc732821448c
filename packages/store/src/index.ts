export type { OpenOptions } from './options.js';
export * from './requests/index.js';
export * from './jobs/index.js';
