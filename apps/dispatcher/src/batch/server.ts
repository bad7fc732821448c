// The OpenAI-compatible Batch API over HTTP (docs/dispatcher.md#batch-api): `/v1/files` and
// `/v1/batches`, each call authenticated by a bearer key naming its tenant. A tenant sees only its
// own files and batches: another tenant's id answers 404 like an unknown one. Keys are never
// logged; a refused key gets a bare 401.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestStore } from '@q/store';
import type { BatchApiConfig, QueueConfig } from '../config/schema.js';
import { errInfo, type Logger } from '../logger.js';
import { ApiKeys } from './api-keys.js';
import { batchJson, fileJson, listJson } from './batch-json.js';
import { BATCH_ENDPOINTS } from './line-check.js';
import { receiveUpload, UploadError } from './upload.js';

/** A running Batch API server. */
export interface BatchApiServer {
  /** The bound port. */
  readonly port: number;
  close(): Promise<void>;
}

/** Largest JSON body of a `POST /v1/batches`. */
const MAX_JSON_BYTES = 1024 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

const notFound = (what: string, id: string): HttpError => new HttpError(404, `No such ${what}: '${id}'`, null, 'not_found');

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function errorBody(message: string, param: string | null, code: string | null): unknown {
  return { error: { message, type: 'invalid_request_error', param, code } };
}

async function readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    n += c.byteLength;
    if (n > MAX_JSON_BYTES) throw new HttpError(413, `The request body must be at most ${MAX_JSON_BYTES} bytes.`);
    parts.push(c);
  }
  let v: unknown;
  try {
    v = JSON.parse(Buffer.concat(parts).toString('utf8'));
  } catch {
    throw new HttpError(400, 'The request body must be JSON.');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new HttpError(400, 'The request body must be a JSON object.');
  return v as Record<string, unknown>;
}

function limitOf(url: URL, max: number, fallback: number): number {
  const raw = url.searchParams.get('limit');
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new HttpError(400, `limit must be an integer from 1 to ${max}.`, 'limit');
  return n;
}

/** What the server needs. */
export interface BatchApiOptions {
  store: RequestStore;
  config: BatchApiConfig;
  /** The queue batch lines go to. */
  queue: QueueConfig;
  logger: Logger;
}

/** Starts the Batch API on `config.host:config.port`. */
export async function startBatchApi(o: BatchApiOptions): Promise<BatchApiServer> {
  const keys = new ApiKeys(o.config.api_keys);
  const { store } = o;
  const batches = store.batches;

  async function route(req: http.IncomingMessage, res: http.ServerResponse, tenant: string): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    let parts: string[];
    try {
      parts = url.pathname
        .split('/')
        .filter((p) => p !== '')
        .map((p) => decodeURIComponent(p));
    } catch {
      throw new HttpError(404, 'Not found.'); // a malformed %-escape names nothing
    }
    const method = req.method ?? 'GET';
    if (parts[0] !== 'v1') throw new HttpError(404, 'Not found.');
    if (parts[1] === 'files') {
      const id = parts[2];
      if (id === undefined && method === 'POST') {
        try {
          const f = await receiveUpload(req, store, tenant, { maxBytes: o.config.max_file_bytes, maxLines: o.config.max_file_lines });
          return send(res, 200, fileJson(f));
        } catch (err) {
          if (err instanceof UploadError) throw new HttpError(400, err.message, err.param);
          throw err;
        }
      }
      if (id === undefined && method === 'GET') {
        const purpose = url.searchParams.get('purpose') ?? undefined;
        const after = url.searchParams.get('after') ?? undefined;
        const page = await batches.listFiles(tenant, { purpose, after, limit: limitOf(url, 10_000, 10_000) });
        return send(res, 200, listJson(page, fileJson));
      }
      if (id !== undefined && parts.length === 3 && method === 'GET') {
        const f = await batches.getFile(tenant, id);
        if (!f) throw notFound('file', id);
        return send(res, 200, fileJson(f));
      }
      if (id !== undefined && parts.length === 3 && method === 'DELETE') {
        if (!(await batches.deleteFile(tenant, id))) throw notFound('file', id);
        return send(res, 200, { id, object: 'file', deleted: true });
      }
      if (id !== undefined && parts[3] === 'content' && parts.length === 4 && method === 'GET') {
        const content = await batches.readFile(tenant, id);
        if (!content) throw notFound('file', id);
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        for await (const chunk of content) {
          if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
        }
        res.end();
        return;
      }
    }
    if (parts[1] === 'batches') {
      const id = parts[2];
      if (id === undefined && method === 'POST') return send(res, 200, await createBatch(await readJson(req), tenant));
      if (id === undefined && method === 'GET') {
        const after = url.searchParams.get('after') ?? undefined;
        return send(res, 200, listJson(await batches.listBatches(tenant, { after, limit: limitOf(url, 100, 20) }), batchJson));
      }
      if (id !== undefined && parts.length === 3 && method === 'GET') {
        const b = await batches.getBatch(tenant, id);
        if (!b) throw notFound('batch', id);
        return send(res, 200, batchJson(b));
      }
      if (id !== undefined && parts[3] === 'cancel' && parts.length === 4 && method === 'POST') {
        const b = await batches.cancelBatch(tenant, id);
        if (!b) throw notFound('batch', id);
        return send(res, 200, batchJson(b));
      }
    }
    throw new HttpError(404, 'Not found.');
  }

  async function createBatch(body: Record<string, unknown>, tenant: string): Promise<unknown> {
    const { input_file_id: input, endpoint, completion_window: window, metadata } = body;
    if (typeof input !== 'string' || input === '') throw new HttpError(400, 'input_file_id must be a file id.', 'input_file_id');
    if (typeof endpoint !== 'string' || !(BATCH_ENDPOINTS as readonly string[]).includes(endpoint)) {
      throw new HttpError(400, `endpoint must be one of ${BATCH_ENDPOINTS.join(', ')}.`, 'endpoint');
    }
    if (window !== '24h') throw new HttpError(400, "completion_window must be '24h'.", 'completion_window');
    if (metadata !== undefined && metadata !== null) {
      const ok =
        typeof metadata === 'object' &&
        !Array.isArray(metadata) &&
        Object.keys(metadata).length <= 16 &&
        Object.values(metadata).every((x) => typeof x === 'string' && x.length <= 512);
      if (!ok) throw new HttpError(400, 'metadata must be an object of at most 16 string values.', 'metadata');
    }
    const b = await batches.createBatch({
      tenant,
      inputFileId: input,
      endpoint,
      queue: o.queue.queue_name,
      completionWindow: window,
      windowSeconds: o.config.completion_window_seconds,
      metadata: (metadata ?? null) as Record<string, string> | null,
    });
    if (!b) throw new HttpError(400, `input_file_id '${input}' is not a batch file of yours.`, 'input_file_id', 'invalid_input_file');
    return batchJson(b);
  }

  const server = http.createServer((req, res) => {
    const tenant = keys.tenantOf(req.headers.authorization);
    if (tenant === undefined) {
      req.resume();
      send(res, 401, errorBody('Unauthorized.', null, null));
      return;
    }
    route(req, res, tenant).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof HttpError) {
        req.resume();
        send(res, err.status, errorBody(err.message, err.param, err.code));
        return;
      }
      // Never the request: its headers carry the key.
      o.logger.error({ ...errInfo(err), method: req.method, path: (req.url ?? '').split('?')[0] }, 'batch api request failed');
      req.resume();
      send(res, 500, { error: { message: 'Internal error.', type: 'server_error', param: null, code: null } });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.config.port, o.config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
