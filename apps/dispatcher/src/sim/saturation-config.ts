// The dispatcher of the saturation runs (`demo --saturation` and test/saturation.test.ts): one
// queue in front of the simulated model server, able to push it to twice its capacity, with or
// without an endpoint-scrape gate on the server's own `/metrics`.
import { loadConfig } from '../config/load.js';
import type { DispatcherConfig } from '../config/schema.js';

/** Options of {@link saturationConfig}. */
export interface SaturationConfigOptions {
  dsn: string;
  /** Queue drained; its results go to `<queue>-out`. */
  queue: string;
  /** The model server's base URL. */
  serverUrl: string;
  /** The model server's capacity (requests it runs at once). */
  capacity: number;
  /** Saturation the gate holds the server to. */
  threshold: number;
  /** With the endpoint-scrape gate, or with none. */
  gated: boolean;
  leaseTtlSeconds: number;
  batchSize: number;
}

/** The effective configuration of one saturation run: only `gated` changes what is measured. */
export function saturationConfig(o: SaturationConfigOptions): DispatcherConfig {
  return loadConfig({
    env: {},
    document: {
      url: o.dsn,
      lease_ttl_seconds: o.leaseTtlSeconds,
      poll_interval_ms: 10,
      batch_size: o.batchSize,
      // The same dispatcher either way, able to push the server to 2× its capacity: only the gate differs.
      concurrency: 2 * o.capacity,
      result_batch_size: 64,
      max_connections: 8,
      health_port: -1,
      metrics_port: -1,
      prometheus_cache_ttl_ms: 0,
      queues: [
        {
          queue_name: o.queue,
          igw_base_url: o.serverUrl,
          result_queue_name: `${o.queue}-out`,
          ...(o.gated
            ? {
                gate_type: 'endpoint-scrape',
                gate_params: {
                  url: `${o.serverUrl}/metrics`,
                  metric: 'vllm:num_requests_running',
                  max_count_per_pod: o.capacity,
                  threshold: o.threshold,
                },
              }
            : {}),
        },
      ],
    },
  });
}
