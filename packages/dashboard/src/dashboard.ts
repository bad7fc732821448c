import type { IncomingMessage, ServerResponse } from 'node:http';
import type pg from 'pg';
import { openPool } from '@q/schema';
import { JobStore } from '@q/store';
import { serve } from './handler.js';
import { Reader } from './reader.js';
import { resolveOptions, type DashboardOptions } from './options.js';

/** A mounted dashboard: a Node request handler and what it holds open. */
export interface Dashboard {
  /**
   * Serves a request. For a path that is not the dashboard's it calls `next` when given (Express,
   * Connect) and answers 404 otherwise. Never rejects: a database failure is a 500 page without
   * the error's details.
   */
  handle(req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): Promise<void>;
  /** The schema the dashboard reads. */
  readonly schema: string;
  /** Closes the pool the dashboard opened (from `dsn`); a pool the application gave stays open. */
  close(): Promise<void>;
}

/**
 * Creates the dashboard's request handler. Give a `dsn` (a pool of two connections is opened) or
 * a `pool`, and the `schema` q's tables are in. Nothing is migrated: the dashboard only reads,
 * and writes only through the actions, which are off unless `actions` is given.
 *
 * @example
 * const dashboard = await createDashboard({ dsn, basePath: '/dashboard' });
 * http.createServer((req, res) => void dashboard.handle(req, res)).listen(4545);
 */
export async function createDashboard(options: DashboardOptions): Promise<Dashboard> {
  const opts = resolveOptions(options);
  const ownsPool = options.pool === undefined;
  const pool: pg.Pool = options.pool ?? (await openPool(options.dsn ?? '', { maxConns: 2, applicationName: 'q-dashboard' }));
  try {
    const store = await JobStore.fromPool(pool, { migrate: false, ...(opts.schema !== null ? { schema: opts.schema } : {}) });
    const deps = { reader: new Reader(pool, store.schema), store, schema: store.schema, opts };
    return {
      schema: store.schema,
      async handle(req, res, next) {
        try {
          const served = await serve(deps, req, res);
          if (served) return;
          if (next) next();
          else {
            res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
            res.end('not found');
          }
        } catch {
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
          res.end('The dashboard could not read the database.');
        }
      },
      async close() {
        await store.close();
        if (ownsPool) await pool.end();
      },
    };
  } catch (err) {
    if (ownsPool) await pool.end().catch(() => undefined);
    throw err;
  }
}
