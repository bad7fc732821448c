// A process for chaos scenario 5: loops acquire → use the protected resource → release on one
// key with a limit, through the Quota client.
import http from 'node:http';
import { createQuota } from '@q/quota';
import { jsonLogger } from '../jsonlog.js';

const dsn = process.env.Q_DSN;
const resource = process.env.Q_RESOURCE_URL;
const prefix = process.env.Q_PREFIX;
if (!dsn || !resource || !prefix) throw new Error('Q_DSN, Q_RESOURCE_URL and Q_PREFIX are required');
const limit = Number(process.env.Q_LIMIT ?? 5);
const logger = jsonLogger(prefix);
const quota = await createQuota({ dsn, ttlMs: Number(process.env.Q_TTL_MS ?? 2000), holderPrefix: prefix, logger, maxConns: 4 });
const agent = new http.Agent({ keepAlive: true });
let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
});

function use(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${resource}${path}`, { method: 'POST', agent }, (res) => {
      res.resume();
      res.on('end', () => resolve());
    });
    req.on('error', reject);
    req.end();
  });
}

logger.info({}, 'ready');
let grants = 0;
while (!stopping) {
  const release = await quota.acquire('tenant:shared', limit);
  if (!release) {
    await new Promise((r) => setTimeout(r, 5 + Math.random() * 10));
    continue;
  }
  grants += 1;
  try {
    await use(`/enter?who=${prefix}`);
    await new Promise((r) => setTimeout(r, 10 + Math.random() * 30));
    await use(`/leave?who=${prefix}`);
  } finally {
    await release();
  }
}
logger.info({ grants }, 'stopped');
await quota.close();
agent.destroy();
