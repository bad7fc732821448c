// The Batch API's storage operations (migration requests/0004_batch_api): files stored a line per
// row and streamed in and out a page at a time, batches, and what a batch driver needs to turn a
// batch's lines into request-queue requests and its results into output and error files.
import { randomBytes } from 'node:crypto';
import { invalidArgument } from '@q/schema';
import { withTransaction } from '@q/schema/internal';
import type { InTransaction } from '../transaction.js';
import type { Batch, BatchFile, BatchFileLine, BatchLineError, BatchLineResult, BatchRequestLine, NewBatch, Page } from './batch-types.js';
import type { StoreContext } from './context.js';
import { appendBatchFileLines } from './sql/append-batch-file-lines.js';
import { cancelBatch } from './sql/cancel-batch.js';
import { createBatch } from './sql/create-batch.js';
import { createBatchFile } from './sql/create-batch-file.js';
import { deleteBatchFile } from './sql/delete-batch-file.js';
import { discardBatchFile } from './sql/discard-batch-file.js';
import { failBatch } from './sql/fail-batch.js';
import { finishBatch } from './sql/finish-batch.js';
import { getBatch } from './sql/get-batch.js';
import { getBatchFile } from './sql/get-batch-file.js';
import { leaseBatches } from './sql/lease-batches.js';
import { listBatches } from './sql/list-batches.js';
import { listBatchFiles } from './sql/list-batch-files.js';
import { markBatchFinalizing } from './sql/mark-batch-finalizing.js';
import { pendingBatchLines } from './sql/pending-batch-lines.js';
import { pendingBatchRequests } from './sql/pending-batch-requests.js';
import { readBatchFileLines } from './sql/read-batch-file-lines.js';
import { recordBatchLines } from './sql/record-batch-lines.js';
import { recordBatchResults } from './sql/record-batch-results.js';
import { renewBatchLease } from './sql/renew-batch-lease.js';
import { sealBatchFile } from './sql/seal-batch-file.js';
import { settleBatchLeftovers } from './sql/settle-batch-leftovers.js';
import { startBatch } from './sql/start-batch.js';
import { MAX_VALUE_BYTES, type NewRequest } from './types.js';
import * as v from './validate.js';

/** The reference Batch API's limits: 200 MB … */
export const MAX_BATCH_FILE_BYTES = 200 * 1024 * 1024;
/** … and 50,000 lines per input file. */
export const MAX_BATCH_FILE_LINES = 50_000;

/** Lines written per statement of an upload (also bounded by {@link PAGE_BYTES}). */
const PAGE_LINES = 1000;
/** Lines read per statement of a download: a few MB of hex text in flight at typical line sizes. */
const READ_PAGE_LINES = 256;
/** Bytes written (or read) per statement of an upload or a download, about. */
const PAGE_BYTES = 512 * 1024;

/** Limits of one upload (default: the reference API's). */
export interface UploadLimits {
  /** At most this many bytes (default {@link MAX_BATCH_FILE_BYTES}). */
  maxBytes?: number;
  /** At most this many lines (default {@link MAX_BATCH_FILE_LINES}). */
  maxLines?: number;
}

/** The new file's metadata. */
export interface NewBatchFile {
  tenant: string;
  /** `batch` for an input file. */
  purpose: string;
  filename: string;
}

/** A new random id: `prefix` and 24 hex digits. */
function newId(prefix: string): string {
  return `${prefix}${randomBytes(12).toString('hex')}`;
}

/** Enqueues requests in a caller's transaction: `RequestStore.enqueue` with `{ client }`. */
export type EnqueueInTransaction = (reqs: NewRequest[], tx: InTransaction) => Promise<void>;

/**
 * The Batch API's storage, reached as `RequestStore.batches`. Client-facing reads and writes take
 * the tenant and never see another tenant's files or batches (`undefined` / `false`, as for an
 * id that does not exist). The driver operations (`leaseBatches` onwards) are what a batch
 * driver runs on the batches it leased; each of its writes is fenced by that lease.
 */
export class BatchStore {
  readonly #ctx: StoreContext;
  readonly #enqueue: EnqueueInTransaction;

  /** @internal Built by `RequestStore`. */
  constructor(ctx: StoreContext, enqueue: EnqueueInTransaction) {
    this.#ctx = ctx;
    this.#enqueue = enqueue;
  }

  /**
   * Stores a file from a stream of chunks, cut into lines (terminators kept, so the file reads
   * back byte for byte) and written a page of lines per statement: memory holds a page and the
   * current line, never the file. Over `maxBytes` or `maxLines` (or a line over 256 MB) the
   * partial file is deleted and the call fails with `INVALID_ARGUMENT`. The file is visible
   * only once its last line is written.
   */
  async uploadFile(file: NewBatchFile, chunks: AsyncIterable<Uint8Array>, limits: UploadLimits = {}): Promise<BatchFile> {
    const op = 'uploadFile';
    v.text(op, 'tenant', file.tenant);
    v.text(op, 'purpose', file.purpose);
    v.text(op, 'filename', file.filename);
    const maxBytes = v.between(op, 'maxBytes', limits.maxBytes ?? MAX_BATCH_FILE_BYTES, 1, Number.MAX_SAFE_INTEGER);
    const maxLines = v.between(op, 'maxLines', limits.maxLines ?? MAX_BATCH_FILE_LINES, 1, 2_147_483_647);
    if (chunks === null || typeof chunks !== 'object' || typeof (chunks as AsyncIterable<Uint8Array>)[Symbol.asyncIterator] !== 'function') {
      throw invalidArgument(`${op}: chunks must be an async iterable of Uint8Array`);
    }
    const id = newId('file-');
    const ctx = this.#ctx;
    await ctx.op(op, undefined, () => createBatchFile(ctx.scope, ctx.pool, id, file.tenant, file.purpose, file.filename));
    try {
      let page: BatchFileLine[] = [];
      let pageBytes = 0;
      let lineNo = 0;
      let total = 0;
      let partial: Buffer[] = [];
      let partialBytes = 0;
      const flush = async (): Promise<void> => {
        if (page.length === 0) return;
        const lines = page;
        page = [];
        pageBytes = 0;
        await ctx.op('appendFileLines', { 'q.batch': lines.length }, () => appendBatchFileLines(ctx.scope, ctx.pool, id, lines));
      };
      const push = async (content: Buffer): Promise<void> => {
        lineNo += 1;
        if (lineNo > maxLines) throw invalidArgument(`${op}: file must have at most ${maxLines} lines`);
        page.push({ lineNo, content });
        pageBytes += content.byteLength;
        if (page.length >= PAGE_LINES || pageBytes >= PAGE_BYTES) await flush();
      };
      for await (const raw of chunks) {
        if (!(raw instanceof Uint8Array)) throw invalidArgument(`${op}: chunks must be an async iterable of Uint8Array`);
        const chunk = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
        total += chunk.byteLength;
        if (total > maxBytes) throw invalidArgument(`${op}: file must be at most ${maxBytes} bytes`);
        let start = 0;
        for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
          const piece = chunk.subarray(start, nl + 1);
          // A view, not a copy: the chunk is the upload's own (never reused), and a page holds its
          // lines only until it is written, so 200 MB of copies do not wait for a collection.
          const line = partialBytes === 0 ? piece : Buffer.concat([...partial, piece]);
          partial = [];
          partialBytes = 0;
          start = nl + 1;
          await push(line);
        }
        if (start < chunk.byteLength) {
          partial.push(Buffer.from(chunk.subarray(start)));
          partialBytes += chunk.byteLength - start;
          if (partialBytes > MAX_VALUE_BYTES) throw invalidArgument(`${op}: a line must be at most ${MAX_VALUE_BYTES} bytes`);
        }
      }
      if (partialBytes > 0) await push(Buffer.concat(partial));
      await flush();
      const sealed = await ctx.op(op, undefined, () => sealBatchFile(ctx.scope, ctx.pool, id));
      if (sealed === undefined) throw new Error(`${op}: the file being uploaded disappeared`);
      return sealed;
    } catch (err) {
      await ctx.op('discardFile', undefined, () => discardBatchFile(ctx.scope, ctx.pool, id)).catch(() => undefined);
      throw err;
    }
  }

  /** The tenant's file, or `undefined`. */
  async getFile(tenant: string, id: string): Promise<BatchFile | undefined> {
    v.text('getFile', 'tenant', tenant);
    v.text('getFile', 'id', id);
    return this.#ctx.op('getFile', undefined, () => getBatchFile(this.#ctx.scope, this.#ctx.pool, tenant, id));
  }

  /** A page of the tenant's files, newest first (`after`: the last id of the previous page; `limit` 1–10,000). */
  async listFiles(tenant: string, opts: { purpose?: string; after?: string; limit?: number } = {}): Promise<Page<BatchFile>> {
    const op = 'listFiles';
    v.text(op, 'tenant', tenant);
    const purpose = opts.purpose === undefined ? null : v.text(op, 'purpose', opts.purpose);
    const after = v.cursor(op, opts.after);
    const limit = v.between(op, 'limit', opts.limit ?? 10_000, 1, 10_000);
    return this.#ctx.op(op, undefined, () => listBatchFiles(this.#ctx.scope, this.#ctx.pool, tenant, purpose, after, limit));
  }

  /** Deletes the tenant's file and its content; false when it had none of that id. */
  async deleteFile(tenant: string, id: string): Promise<boolean> {
    v.text('deleteFile', 'tenant', tenant);
    v.text('deleteFile', 'id', id);
    return this.#ctx.op('deleteFile', undefined, () => deleteBatchFile(this.#ctx.scope, this.#ctx.pool, tenant, id));
  }

  /**
   * The content of the tenant's file as a stream of pages (each a few MB at most, read by one
   * statement), or `undefined` when the tenant has no such file.
   */
  async readFile(tenant: string, id: string): Promise<AsyncIterable<Uint8Array> | undefined> {
    const file = await this.getFile(tenant, id);
    if (file === undefined) return undefined;
    const ctx = this.#ctx;
    return {
      async *[Symbol.asyncIterator]() {
        let after = 0;
        for (;;) {
          const lines = await ctx.op('readFileLines', undefined, () => readBatchFileLines(ctx.scope, ctx.pool, file.id, after, READ_PAGE_LINES));
          const last = lines.at(-1);
          if (last === undefined) return;
          after = last.lineNo;
          yield Buffer.concat(lines.map((l) => l.content));
        }
      },
    };
  }

  /** Up to `limit` lines of file `id` after line `afterLine` (a driver reading a batch's input; no tenant check). */
  async readLines(id: string, afterLine: number, limit: number): Promise<BatchFileLine[]> {
    const op = 'readLines';
    v.text(op, 'id', id);
    const after = v.count(op, 'afterLine', afterLine);
    const n = v.between(op, 'limit', limit, 1, 100_000);
    return this.#ctx.op(op, undefined, () => readBatchFileLines(this.#ctx.scope, this.#ctx.pool, id, after, n));
  }

  /**
   * Creates a batch in `validating`, with its (hidden, empty) output and error files;
   * `undefined` when `inputFileId` is not a processed `batch` file of the tenant.
   */
  async createBatch(b: NewBatch): Promise<Batch | undefined> {
    const op = 'createBatch';
    v.text(op, 'tenant', b.tenant);
    v.text(op, 'inputFileId', b.inputFileId);
    v.text(op, 'endpoint', b.endpoint);
    v.text(op, 'queue', b.queue);
    v.text(op, 'completionWindow', b.completionWindow);
    v.between(op, 'windowSeconds', b.windowSeconds, 1, 2_147_483_647);
    const metadata = v.batchMetadata(op, b.metadata);
    const batch = newId('batch_');
    const ids = { batch, output: newId('file-'), error: newId('file-') };
    return this.#ctx.op(op, undefined, () => createBatch(this.#ctx.scope, this.#ctx.pool, ids, { ...b, metadata }));
  }

  /** The tenant's batch, or `undefined`. */
  async getBatch(tenant: string, id: string): Promise<Batch | undefined> {
    v.text('getBatch', 'tenant', tenant);
    v.text('getBatch', 'id', id);
    return this.#ctx.op('getBatch', undefined, () => getBatch(this.#ctx.scope, this.#ctx.pool, tenant, id));
  }

  /** A page of the tenant's batches, newest first (`after`: the last id of the previous page; `limit` 1–100). */
  async listBatches(tenant: string, opts: { after?: string; limit?: number } = {}): Promise<Page<Batch>> {
    const op = 'listBatches';
    v.text(op, 'tenant', tenant);
    const after = v.cursor(op, opts.after);
    const limit = v.between(op, 'limit', opts.limit ?? 20, 1, 100);
    return this.#ctx.op(op, undefined, () => listBatches(this.#ctx.scope, this.#ctx.pool, tenant, after, limit));
  }

  /** Moves the tenant's validating or running batch to `cancelling`; the batch as it then is, or `undefined`. */
  async cancelBatch(tenant: string, id: string): Promise<Batch | undefined> {
    v.text('cancelBatch', 'tenant', tenant);
    v.text('cancelBatch', 'id', id);
    return this.#ctx.op('cancelBatch', undefined, () => cancelBatch(this.#ctx.scope, this.#ctx.pool, tenant, id));
  }

  /** Driver: leases up to `limit` unfinished batches (lapsed, or already `owner`'s) to `owner` for `ttlMs`, oldest first. */
  async leaseBatches(owner: string, ttlMs: number, limit: number): Promise<Batch[]> {
    const op = 'leaseBatches';
    v.text(op, 'owner', owner);
    const ttl = v.between(op, 'ttlMs', ttlMs, 1, 86_400_000);
    const n = v.between(op, 'limit', limit, 1, 10_000);
    return this.#ctx.op(op, undefined, () => leaseBatches(this.#ctx.scope, this.#ctx.pool, owner, ttl, n));
  }

  /**
   * Driver: extends `owner`'s lease of an unfinished batch to now + `ttlMs` (during a long step:
   * validating or enqueueing 50,000 lines); false when another driver took it over.
   */
  async renewLease(id: string, owner: string, ttlMs: number): Promise<boolean> {
    const op = 'renewLease';
    v.text(op, 'id', id);
    v.text(op, 'owner', owner);
    const ttl = v.between(op, 'ttlMs', ttlMs, 1, 86_400_000);
    return this.#ctx.op(op, undefined, () => renewBatchLease(this.#ctx.scope, this.#ctx.pool, id, owner, ttl));
  }

  /** Driver: a validating batch fails with `errors` (nothing was enqueued); false when `owner` no longer holds it. */
  async failBatch(batch: Pick<Batch, 'id' | 'outputFileId' | 'errorFileId'>, owner: string, errors: BatchLineError[]): Promise<boolean> {
    const op = 'failBatch';
    v.text(op, 'owner', owner);
    v.list(op, 'errors', errors);
    const files = [batch.outputFileId, batch.errorFileId].filter((f): f is string => f !== null);
    return this.#ctx.op(op, undefined, () => failBatch(this.#ctx.scope, this.#ctx.pool, batch.id, owner, errors, files));
  }

  /** Driver: a validated batch goes `in_progress` with `total` request lines; false when `owner` no longer holds it. */
  async startBatch(id: string, owner: string, total: number): Promise<boolean> {
    const op = 'startBatch';
    v.text(op, 'owner', owner);
    const n = v.count(op, 'total', total);
    return this.#ctx.op(op, undefined, () => startBatch(this.#ctx.scope, this.#ctx.pool, id, owner, n));
  }

  /**
   * Driver: in one transaction, records the request lines of input lines `from + 1 … to` and
   * enqueues their requests, moving the batch's enqueue cursor from `from` to `to`. False (and
   * nothing written) when the cursor was not at `from` or `owner` no longer holds the batch.
   * `requests` is one per line, or empty: the lines of a `cancelling` batch are recorded without
   * running, to be settled as cancelled.
   */
  async enqueueLines(id: string, owner: string, from: number, to: number, lines: BatchRequestLine[], requests: NewRequest[]): Promise<boolean> {
    const op = 'enqueueLines';
    v.text(op, 'owner', owner);
    const a = v.count(op, 'from', from);
    const b = v.count(op, 'to', to);
    if (b < a) throw invalidArgument(`${op}: to must be at least from`);
    v.list(op, 'lines', lines);
    v.list(op, 'requests', requests);
    if (requests.length > 0 && lines.length !== requests.length) throw invalidArgument(`${op}: requests must have one request per line, or none`);
    const ctx = this.#ctx;
    return ctx.op(op, { 'q.batch': lines.length }, () =>
      withTransaction(ctx.pool, async (client) => {
        if (!(await recordBatchLines(ctx.scope, client, id, owner, a, b, lines))) return false;
        if (requests.length > 0) await this.#enqueue(requests, { client });
        return true;
      }),
    );
  }

  /**
   * Driver: writes results of a batch's lines (each line once, whoever writes it) and deletes
   * route results `seqs`; the line numbers that moved (what a caller may count: tokens, outcomes).
   */
  async recordResults(batchId: string, results: BatchLineResult[], seqs: number[]): Promise<number[]> {
    const op = 'recordResults';
    v.text(op, 'batchId', batchId);
    v.list(op, 'results', results);
    v.list(op, 'seqs', seqs);
    if (results.length === 0 && seqs.length === 0) return [];
    return this.#ctx.op(op, { 'q.batch': results.length }, () => recordBatchResults(this.#ctx.scope, this.#ctx.pool, batchId, results, seqs));
  }

  /** Driver: the lines of a batch without a result yet, with their custom ids and request ids. */
  async pendingRequests(batchId: string): Promise<BatchRequestLine[]> {
    v.text('pendingRequests', 'batchId', batchId);
    return this.#ctx.op('pendingRequests', undefined, () => pendingBatchRequests(this.#ctx.scope, this.#ctx.pool, batchId));
  }

  /** Driver: of a batch's lines `lineNos`, those without a result yet (a page of results to record: its custom ids). */
  async pendingLines(batchId: string, lineNos: number[]): Promise<BatchRequestLine[]> {
    const op = 'pendingLines';
    v.text(op, 'batchId', batchId);
    v.list(op, 'lineNos', lineNos);
    for (const n of lineNos) v.between(op, 'lineNos[]', n, 1, 2_147_483_647);
    if (lineNos.length === 0) return [];
    return this.#ctx.op(op, { 'q.batch': lineNos.length }, () => pendingBatchLines(this.#ctx.scope, this.#ctx.pool, batchId, lineNos));
  }

  /**
   * Driver: settles every pending line of a batch as `how`, with an error-file line `{ code, message }`;
   * with `spareInFlight`, not the lines whose request is dispatched (a cancel lets them finish). How many.
   */
  async settleLeftovers(batchId: string, how: 'expired' | 'cancelled', code: string, message: string, spareInFlight = false): Promise<number> {
    const op = 'settleLeftovers';
    v.text(op, 'batchId', batchId);
    const state = v.leftoverState(op, how);
    v.text(op, 'code', code);
    v.anyText(op, 'message', message);
    const spare = v.bool(op, 'spareInFlight', spareInFlight);
    return this.#ctx.op(op, undefined, () => settleBatchLeftovers(this.#ctx.scope, this.#ctx.pool, batchId, state, code, message, spare));
  }

  /** Driver: a running batch whose every line has its result goes `finalizing`; false otherwise. */
  async markFinalizing(id: string, owner: string): Promise<boolean> {
    v.text('markFinalizing', 'owner', owner);
    return this.#ctx.op('markFinalizing', undefined, () => markBatchFinalizing(this.#ctx.scope, this.#ctx.pool, id, owner));
  }

  /** Driver: ends a batch with no pending line as `status`, its files made visible (empty ones dropped); `undefined` otherwise. */
  async finishBatch(id: string, owner: string, status: 'completed' | 'expired' | 'cancelled'): Promise<Batch | undefined> {
    const op = 'finishBatch';
    v.text(op, 'owner', owner);
    if (status !== 'completed' && status !== 'expired' && status !== 'cancelled') {
      throw invalidArgument(`${op}: status must be 'completed', 'expired' or 'cancelled'`);
    }
    return this.#ctx.op(op, undefined, () => finishBatch(this.#ctx.scope, this.#ctx.pool, id, owner, status));
  }
}
