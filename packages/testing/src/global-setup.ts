import { acquireServer, releaseServer } from './server.js';

/**
 * vitest `globalSetup`: finds or starts one Postgres for the whole run and exports its URL as
 * `TEST_DATABASE_URL`, which test workers and the child processes they spawn inherit.
 */
export default async function setup(): Promise<() => Promise<void>> {
  await acquireServer();
  return () => releaseServer();
}
