// A real HTTP receiver on loopback for webhook and notification tests.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the receiver got. */
export interface Delivery {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
  at: number;
}

/** Decides the status of a request; may wait (a slow receiver). */
export type Behaviour = (req: { path: string; headers: http.IncomingHttpHeaders; body: string; seen: number }) => number | Promise<number>;

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** Requests seen per idempotency key. */
  byKey: Map<string, Delivery[]>;
  close(): Promise<void>;
}

export async function startReceiver(behaviour: Behaviour): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  const byKey = new Map<string, Delivery[]>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const key = String(req.headers['idempotency-key'] ?? '');
      const seen = byKey.get(key)?.length ?? 0;
      Promise.resolve(behaviour({ path: req.url ?? '/', headers: req.headers, body, seen }))
        .then((status) => {
          const d: Delivery = { path: req.url ?? '/', headers: req.headers, body, status, at: Date.now() };
          deliveries.push(d);
          byKey.set(key, [...(byKey.get(key) ?? []), d]);
          res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
        })
        .catch(() => res.writeHead(500).end());
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    deliveries,
    byKey,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
