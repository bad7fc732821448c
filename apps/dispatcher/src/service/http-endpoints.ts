// `/healthz`, `/readyz` and Prometheus `/metrics` over node:http (docs/design/dispatcher.md#health).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PrometheusExporter } from '@opentelemetry/exporter-prometheus';

/** What the endpoints read. */
export interface EndpointSources {
  /** False before start and once stopping. */
  isReady(): boolean;
  /** The flow health check (a database ping); rejects when unhealthy. */
  check(): Promise<void>;
  /** Serves `/metrics` when given. */
  prometheus?: PrometheusExporter;
}

/** One listening server. */
export interface Endpoint {
  readonly port: number;
  close(): Promise<void>;
}

function json(res: http.ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Listens on `host` (default: all interfaces, as probes need); `port` 0 = any free port. */
export async function startEndpoint(port: number, src: EndpointSources, host?: string): Promise<Endpoint> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') return json(res, 405, { error: 'method not allowed' });
    if (path === '/healthz') return json(res, 200, { status: 'ok' });
    if (path === '/readyz') {
      if (!src.isReady()) return json(res, 503, { status: 'not ready' });
      const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('health check timed out')), 3000).unref());
      Promise.race([src.check(), timeout]).then(
        () => json(res, 200, { status: 'ready' }),
        (err: unknown) => json(res, 503, { status: 'not ready', error: (err as Error).message ?? 'unhealthy' }),
      );
      return;
    }
    if (path === '/metrics' && src.prometheus) return src.prometheus.getMetricsRequestHandler(req, res);
    json(res, 404, { error: 'not found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
