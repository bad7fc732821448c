#!/usr/bin/env node
// q-dashboard --dsn <dsn> [--schema s] [--port p] [--host h] [--show-payloads]
// Actions are on when Q_DASHBOARD_TOKEN is set (an environment variable, so the token never
// shows in a process list).
import http from 'node:http';
import { parseArgs } from 'node:util';
import { isQError, redactDsn } from '@q/schema';
import { createDashboard } from './dashboard.js';

const USAGE = `usage: q-dashboard --dsn <dsn> [--schema s] [--port p] [--host h] [--show-payloads]
  --dsn            PostgreSQL DSN (or DATABASE_URL)
  --schema         schema q's tables are in (default: the connection's current schema)
  --port           default 4545
  --host           default 127.0.0.1
  --show-payloads  show job payloads and results (escaped)
  Q_DASHBOARD_TOKEN=<token, 16+ characters> enables actions (cancel, retry, forget) for requests bearing it.`;

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        dsn: { type: 'string' },
        schema: { type: 'string' },
        port: { type: 'string', default: '4545' },
        host: { type: 'string', default: '127.0.0.1' },
        'show-payloads': { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const dsn = values.dsn ?? process.env.DATABASE_URL;
  if (!dsn) {
    process.stderr.write(`--dsn is required\n${USAGE}\n`);
    return 2;
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`--port must be a port number\n`);
    return 2;
  }
  const token = process.env.Q_DASHBOARD_TOKEN;
  let dashboard;
  try {
    dashboard = await createDashboard({
      dsn,
      ...(values.schema !== undefined ? { schema: values.schema } : {}),
      showPayloads: values['show-payloads'],
      ...(token ? { actions: { token } } : {}),
    });
  } catch (err) {
    process.stderr.write(`q-dashboard: ${isQError(err) ? `${err.code}: ` : ''}${redactDsn((err as Error).message)}\n`);
    return 1;
  }
  const d = dashboard;
  const server = http.createServer((req, res) => void d.handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, values.host, resolve);
  });
  const addr = server.address();
  const shown =
    typeof addr === 'object' && addr ? `${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}` : String(addr);
  process.stdout.write(`q dashboard on http://${shown}/ (schema ${d.schema}${token ? ', actions on' : ', read-only'})\n`);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
  await d.close();
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
