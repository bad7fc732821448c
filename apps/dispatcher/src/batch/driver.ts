// The batch driver: leases unfinished batches (any dispatcher process may drive any batch; a
// lapsed lease is taken over) and moves each one on: validating → in_progress (its lines
// enqueued on the request queue, a page per transaction) → results collected from the batch's
// route into its output and error files → finalizing → completed; or failed at validation,
// expired at its deadline, cancelling → cancelled.
import type { Batch, BatchLineError, BatchRequestLine, NewRequest, RequestStore } from '@q/store';
import type { QueueConfig } from '../config/schema.js';
import { decodeResult, newRequestToken, splitPayload, type PublicRequest } from '../formats.js';
import { errInfo, type Logger } from '../logger.js';
import type { BatchMetrics } from './batch-metrics.js';
import { checkLine, MAX_REPORTED_ERRORS } from './line-check.js';
import { resultLine } from './result-line.js';

/** Lines read (and enqueued) per page. */
const PAGE = 500;
/**
 * Lines of a batch on the request queue without a result at most (about; whole pages): a
 * 50,000-line batch enqueued at once is a backlog of one tenant that admission can hold only in
 * part, and the rest is dispatched, parked and dispatched again, several writes per line. Kept
 * within what admission holds in memory for a key, the backlog is dispatched once per line,
 * and other work of the queue is not behind a whole batch.
 */
const AHEAD = 2000;
/** Results of a batch's route (`q_results`) are kept this long when nobody collects them (a finished batch). */
const RESULT_TTL_SECONDS = 7 * 86_400;

const BATCH_ROUTE_PREFIX = 'batch:';

/** The route a batch's results are written to. */
export function batchRoute(batchId: string): string {
  return `${BATCH_ROUTE_PREFIX}${batchId}`;
}

/** Whether results on `route` go to a batch (the request is batch traffic). */
export function isBatchRoute(route: string): boolean {
  return route.startsWith(BATCH_ROUTE_PREFIX);
}

/** The request-queue id of a batch's line. */
export function batchRequestId(batchId: string, lineNo: number): string {
  return `${batchId}:${lineNo}`;
}

/** Options of {@link BatchDriver}. */
export interface BatchDriverOptions {
  store: RequestStore;
  /** The queue batch lines go to. */
  queue: QueueConfig;
  /** Metadata attribute(s) the tenant is written to: every gate's, and the fairness attribute. */
  tenantAttributes: string[];
  owner: string;
  intervalMs: number;
  leaseMs: number;
  logger: Logger;
  metrics: BatchMetrics;
  /** Lines of a batch enqueued ahead of its results at most (default {@link AHEAD}; tests set fewer). */
  ahead?: number;
}

/** Drives the batches of the database, one round every `intervalMs`, until stopped. */
export class BatchDriver {
  readonly #o: BatchDriverOptions;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(o: BatchDriverOptions) {
    this.#o = o;
  }

  /** Starts the rounds. */
  start(): void {
    const loop = (): void => {
      if (this.#stopped) return;
      this.#timer = setTimeout(() => {
        this.#round = this.round()
          .catch((err: unknown) => this.#o.logger.warn(errInfo(err), 'batch driver round failed'))
          .finally(loop);
      }, this.#o.intervalMs);
    };
    loop();
  }

  /** Stops after the round in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#round;
  }

  /** One round: lease the unfinished batches and move each on. */
  async round(): Promise<void> {
    const leased = await this.#o.store.batches.leaseBatches(this.#o.owner, this.#o.leaseMs, 16);
    for (const b of leased) {
      if (this.#stopped) return;
      try {
        await this.#step(b);
      } catch (err) {
        this.#o.logger.warn({ ...errInfo(err), batch: b.id }, 'batch step failed; retried next round');
      }
    }
  }

  async #step(b: Batch): Promise<void> {
    const now = Math.floor(Date.now() / 1000);
    if (b.status === 'validating') {
      await this.#validate(b);
      return;
    }
    if (b.status === 'in_progress' || b.status === 'finalizing') {
      const settled = b.completed + b.failed + (await this.#collect(b));
      if (now >= b.deadline) {
        // Every line is recorded (its request cancelled at once) so that each gets its error line.
        if (!(await this.#enqueue(b, Infinity))) return;
        await this.#cancelPending(b);
        await this.#collect(b);
        const expired = await this.#o.store.batches.settleLeftovers(
          b.id,
          'expired',
          'batch_expired',
          'This request could not be executed before the completion window expired.',
        );
        this.#o.metrics.settled(b.tenant, 'expired', expired);
        await this.#o.store.batches.finishBatch(b.id, this.#o.owner, 'expired');
        return;
      }
      if (!(await this.#enqueue(b, settled + (this.#o.ahead ?? AHEAD)))) return;
      await this.#o.store.batches.markFinalizing(b.id, this.#o.owner);
      await this.#o.store.batches.finishBatch(b.id, this.#o.owner, 'completed');
      return;
    }
    if (b.status === 'cancelling') {
      // The lines of a started batch not enqueued yet are recorded without their requests, so
      // that each gets its `batch_cancelled` line below.
      if (b.total > 0 && !(await this.#enqueue(b, Infinity, false))) return;
      await this.#cancelPending(b);
      await this.#collect(b);
      const cancelled = await this.#o.store.batches.settleLeftovers(
        b.id,
        'cancelled',
        'batch_cancelled',
        'This request was cancelled with its batch.',
        true,
      );
      this.#o.metrics.settled(b.tenant, 'cancelled', cancelled);
      await this.#o.store.batches.finishBatch(b.id, this.#o.owner, 'cancelled');
    }
  }

  /**
   * Renews the lease of a batch during a long step once a third of it has passed since the last
   * renewal; false when another driver took the batch over (the step stops: its writes would be fenced anyway).
   */
  async #keep(b: Batch, since: { at: number }): Promise<boolean> {
    if (Date.now() - since.at < this.#o.leaseMs / 3) return true;
    since.at = Date.now();
    return this.#o.store.batches.renewLease(b.id, this.#o.owner, this.#o.leaseMs);
  }

  /** Reads the whole input once: a batch with a bad line fails (nothing enqueued); else it goes in_progress. */
  async #validate(b: Batch): Promise<void> {
    const seen = new Set<string>();
    const errors: BatchLineError[] = [];
    let total = 0;
    let after = 0;
    const lease = { at: Date.now() };
    for (;;) {
      if (!(await this.#keep(b, lease))) return;
      const lines = await this.#o.store.batches.readLines(b.inputFileId, after, PAGE);
      for (const l of lines) {
        const r = checkLine(Buffer.from(l.content).toString('utf8'), l.lineNo, b.endpoint, seen);
        if (r === null) continue;
        if ('code' in r) {
          if (errors.length < MAX_REPORTED_ERRORS) errors.push(r);
        } else total += 1;
      }
      const last = lines.at(-1);
      if (last === undefined) break;
      after = last.lineNo;
    }
    if (errors.length === 0 && total === 0)
      errors.push({ code: 'empty_file', message: 'The input file has no request line.', param: null, line: null });
    if (errors.length > 0) {
      await this.#o.store.batches.failBatch(b, this.#o.owner, errors);
      this.#o.logger.info({ batch: b.id, errors: errors.length }, 'batch failed validation');
      return;
    }
    await this.#o.store.batches.startBatch(b.id, this.#o.owner, total);
  }

  /**
   * Enqueues the lines not enqueued yet up to line `upTo` (and the page it falls in), a page per
   * transaction; without `withRequests`, records them only (a cancelled batch's). True once every
   * line is.
   */
  async #enqueue(b: Batch, upTo: number, withRequests = true): Promise<boolean> {
    const file = await this.#o.store.batches.getFile(b.tenant, b.inputFileId);
    const lines = file?.lines ?? b.enqueuedLines;
    let from = b.enqueuedLines;
    const lease = { at: Date.now() };
    while (from < lines) {
      if (from >= upTo) return false;
      if (!(await this.#keep(b, lease))) return false;
      const page = await this.#o.store.batches.readLines(b.inputFileId, from, PAGE);
      const last = page.at(-1);
      if (last === undefined) break;
      const rows: BatchRequestLine[] = [];
      const reqs: NewRequest[] = [];
      for (const l of page) {
        const r = checkLine(Buffer.from(l.content).toString('utf8'), l.lineNo, b.endpoint, new Set());
        if (r === null || 'code' in r) continue; // validated already: only blank lines are skipped here
        const id = batchRequestId(b.id, l.lineNo);
        rows.push({ lineNo: l.lineNo, customId: r.customId, requestId: id });
        if (withRequests) reqs.push(this.#request(b, id, r.url, r.body));
      }
      if (!(await this.#o.store.batches.enqueueLines(b.id, this.#o.owner, from, last.lineNo, rows, reqs))) return false;
      from = last.lineNo;
    }
    return true;
  }

  #request(b: Batch, id: string, url: string, body: Record<string, unknown>): NewRequest {
    const q = this.#o.queue;
    const metadata = Object.fromEntries(this.#o.tenantAttributes.map((a) => [a, b.tenant]));
    const req: PublicRequest = { id, deadline: b.deadline, payload: body, metadata, endpoint: url };
    const token = newRequestToken();
    const { envelope, payload } = splitPayload(req, {
      request_token: token,
      request_queue_name: q.queue_name,
      queue_id: q.queue_name,
      result_queue_name: batchRoute(b.id),
      result_ttl_seconds: RESULT_TTL_SECONDS,
    });
    return { id, token, queue: q.queue_name, deadline: b.deadline, envelope, payload };
  }

  /** Moves the results waiting on the batch's route into its files, each line once; how many lines moved. */
  async #collect(b: Batch): Promise<number> {
    const route = batchRoute(b.id);
    let total = 0;
    for (;;) {
      const got = await this.#o.store.peekResults(route, Math.floor(Date.now() / 1000), PAGE);
      if (got.length === 0) return total;
      const lineNos = got.map((r) => Number(r.id.slice(b.id.length + 1))).filter((n) => Number.isInteger(n) && n > 0 && n <= 2_147_483_647);
      const customIds = new Map((await this.#o.store.batches.pendingLines(b.id, lineNos)).map((p) => [p.lineNo, p.customId]));
      const results = [];
      for (const r of got) {
        const lineNo = Number(r.id.slice(b.id.length + 1));
        const customId = customIds.get(lineNo);
        if (customId === undefined) continue; // settled already: only its route row is deleted
        results.push(resultLine(lineNo, customId, r.id, decodeResult(r.id, r.payload)));
      }
      const moved = await this.#o.store.batches.recordResults(
        b.id,
        results,
        got.map((r) => r.seq),
      );
      this.#o.metrics.results(b.tenant, results, moved);
      total += moved.length;
      if (got.length < PAGE) return total;
    }
  }

  /** Cancels the requests of the batch's pending lines (those not dispatched yet never run). */
  async #cancelPending(b: Batch): Promise<void> {
    const pending = await this.#o.store.batches.pendingRequests(b.id);
    if (pending.length > 0) await this.#o.store.cancel(pending.map((p) => p.requestId));
  }
}
