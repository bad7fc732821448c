// `@q/schema/tables`: the Drizzle table objects of every module (for drizzle-kit and for apps that query
// q's tables with Drizzle). A separate entry, so that runtime users of `@q/schema` do not load drizzle-orm.
export * from './tables/requests.js';
export * from './tables/quota.js';
export * from './tables/jobs.js';
