import { startEmbeddedPostgres, type EmbeddedPostgres } from '@q/devdb';

/** Where the test Postgres came from. */
export type ServerSource = 'env' | 'testcontainers' | 'embedded';

interface Running {
  url: string;
  source: ServerSource;
  stop: () => Promise<void>;
  refs: number;
}

// globalSetup runs once per vitest project, all in the main process: share one server.
let running: Promise<Running> | undefined;

/**
 * The test database, in this order: `TEST_DATABASE_URL` or `DATABASE_URL` if set; a
 * testcontainers Postgres when a Docker daemon answers; otherwise the embedded Postgres from npm.
 */
export async function acquireServer(): Promise<string> {
  running ??= start();
  const r = await running;
  r.refs += 1;
  process.env.TEST_DATABASE_URL = r.url;
  process.env.Q_TEST_DB_SOURCE = r.source;
  return r.url;
}

/** Drops one reference; the last one stops a server this process started. */
export async function releaseServer(): Promise<void> {
  if (!running) return;
  const r = await running;
  r.refs -= 1;
  if (r.refs > 0) return;
  running = undefined;
  await r.stop();
}

async function start(): Promise<Running> {
  const fromEnv = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
  if (fromEnv) return { url: fromEnv, source: 'env', stop: async () => undefined, refs: 0 };
  const container = await startContainer();
  if (container) return container;
  let server: EmbeddedPostgres | undefined;
  try {
    const started = await startEmbeddedPostgres({ fast: true });
    server = started;
    return { url: started.dsn, source: 'embedded', stop: () => started.stop(), refs: 0 };
  } catch (err) {
    await server?.stop().catch(() => undefined);
    throw err;
  }
}

async function startContainer(): Promise<Running | undefined> {
  if (process.env.Q_TEST_NO_DOCKER === '1') return undefined;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
  } catch {
    return undefined; // no Docker daemon: fall through to the embedded server
  }
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer('postgres:18-alpine').start();
  return { url: container.getConnectionUri(), source: 'testcontainers', stop: async () => void (await container.stop()), refs: 0 };
}
