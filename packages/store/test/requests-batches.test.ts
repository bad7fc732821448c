import { QErrorCode, isQError } from '@q/schema';
import { describe, expect, it } from 'vitest';
import { stampOf, type BatchLineResult, type NewRequest } from '../src/index.js';
import { at, useTestStore } from './requests/helpers.js';

// The Batch API's storage (RequestStore.batches): files stored a line per row, tenant-scoped
// reads, and the driver operations that enqueue a batch's lines and write each result once.

const t = useTestStore({ resetQueue: 'q' });

async function* chunks(...parts: string[]): AsyncIterable<Uint8Array> {
  for (const p of parts) yield Buffer.from(p, 'utf8');
}

async function text(it: AsyncIterable<Uint8Array> | undefined): Promise<string> {
  const out: Buffer[] = [];
  for await (const c of it!) out.push(Buffer.from(c));
  return Buffer.concat(out).toString('utf8');
}

/** What the promise `fn` returns rejects with (fails when it resolves). */
async function rejection(fn: () => Promise<unknown>): Promise<unknown> {
  return fn().then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err,
  );
}

const line = (s: string): Uint8Array => Buffer.from(`${s}\n`, 'utf8');

describe('RequestStore.batches: files', () => {
  it('an upload cut across chunks reads back byte for byte, line count and size kept, only for its tenant', async () => {
    const b = t.store.batches;
    const body = '{"a":1}\n{"b":2}\r\n\n{"c":"é"}';
    const f = await b.uploadFile({ tenant: 'acme', purpose: 'batch', filename: 'in.jsonl' }, chunks('{"a"', ':1}\n{"b":2}\r', '\n\n{"c":"é"}'));
    expect(f).toMatchObject({
      tenant: 'acme',
      purpose: 'batch',
      filename: 'in.jsonl',
      lines: 4,
      bytes: Buffer.byteLength(body),
      status: 'processed',
    });
    expect(f.id).toMatch(/^file-[0-9a-f]{24}$/);
    expect(await text(await b.readFile('acme', f.id))).toBe(body);
    expect(await b.getFile('other', f.id)).toBeUndefined();
    expect(await b.readFile('other', f.id)).toBeUndefined();
    expect(await b.deleteFile('other', f.id)).toBe(false);
    expect((await b.listFiles('acme')).data.map((x) => x.id)).toContain(f.id);
    expect((await b.listFiles('other')).data).toEqual([]);
    expect(await b.deleteFile('acme', f.id)).toBe(true);
    expect(await b.getFile('acme', f.id)).toBeUndefined();
  });

  it('an upload over the line or byte limit fails with INVALID_ARGUMENT and leaves no file', async () => {
    const b = t.store.batches;
    const tooMany = await rejection(() =>
      b.uploadFile({ tenant: 'acme', purpose: 'batch', filename: 'x' }, chunks('1\n2\n3\n'), { maxLines: 2 }),
    );
    expect(isQError(tooMany, QErrorCode.INVALID_ARGUMENT)).toBe(true);
    expect((tooMany as Error).message).toBe('uploadFile: file must have at most 2 lines');
    const tooBig = await rejection(() =>
      b.uploadFile({ tenant: 'acme', purpose: 'batch', filename: 'x' }, chunks('12345', '678'), { maxBytes: 7 }),
    );
    expect((tooBig as Error).message).toBe('uploadFile: file must be at most 7 bytes');
    expect((await t.store.pool.query(`SELECT count(*)::int AS n FROM ${t.store.schema}.q_batch_files`)).rows[0].n).toBe(0);
    const bad = await rejection(() => b.uploadFile({ tenant: '', purpose: 'batch', filename: 'x' }, chunks('1\n')));
    expect(isQError(bad, QErrorCode.INVALID_ARGUMENT)).toBe(true);
  });

  it('listFiles pages newest first with after and limit', async () => {
    const b = t.store.batches;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await b.uploadFile({ tenant: 'acme', purpose: 'batch', filename: `f${i}` }, chunks(`${i}\n`))).id);
    const all = (await b.listFiles('acme')).data.map((f) => f.id);
    expect([...all].sort()).toEqual([...ids].sort());
    const first = await b.listFiles('acme', { limit: 2 });
    expect(first.hasMore).toBe(true);
    const rest = await b.listFiles('acme', { limit: 2, after: first.data[1]!.id });
    expect([...first.data, ...rest.data].map((f) => f.id)).toEqual(all);
    expect(rest.hasMore).toBe(false);
  });
});

describe('RequestStore.batches: batches', () => {
  async function newBatch(tenant = 'acme', lines = ['{"custom_id":"a"}', '{"custom_id":"b"}']) {
    const b = t.store.batches;
    const f = await b.uploadFile({ tenant, purpose: 'batch', filename: 'in.jsonl' }, chunks(lines.map((l) => `${l}\n`).join('')));
    const batch = await b.createBatch({
      tenant,
      inputFileId: f.id,
      endpoint: '/v1/chat/completions',
      queue: 'q',
      completionWindow: '24h',
      windowSeconds: 86_400,
    });
    return { file: f, batch: batch! };
  }

  it('createBatch needs a processed batch file of the same tenant; the batch is validating, deadline = creation + window', async () => {
    const { file, batch } = await newBatch();
    expect(batch).toMatchObject({ status: 'validating', inputFileId: file.id, tenant: 'acme', total: 0, metadata: null });
    expect(batch.id).toMatch(/^batch_[0-9a-f]{24}$/);
    expect(batch.deadline).toBe(batch.createdAt + 86_400);
    const b = t.store.batches;
    expect(
      await b.createBatch({
        tenant: 'other',
        inputFileId: file.id,
        endpoint: '/v1/embeddings',
        queue: 'q',
        completionWindow: '24h',
        windowSeconds: 1,
      }),
    ).toBeUndefined();
    expect(await b.getBatch('other', batch.id)).toBeUndefined();
    expect(await b.cancelBatch('other', batch.id)).toBeUndefined();
    expect((await b.listBatches('other')).data).toEqual([]);
    const bad = await rejection(() =>
      b.createBatch({ tenant: 'acme', inputFileId: file.id, endpoint: '/v1/embeddings', queue: 'q', completionWindow: '24h', windowSeconds: 0 }),
    );
    expect((bad as Error).message).toBe('createBatch: windowSeconds must be an integer from 1 to 2147483647');
  });

  it('a failed validation keeps the errors and drops the output and error files', async () => {
    const { batch } = await newBatch();
    const b = t.store.batches;
    expect((await b.leaseBatches('d1', 60_000, 10)).map((x) => x.id)).toEqual([batch.id]);
    expect(await b.leaseBatches('d2', 60_000, 10)).toEqual([]); // d1 holds it
    expect(await b.renewLease(batch.id, 'd2', 60_000)).toBe(false);
    expect(await b.renewLease(batch.id, 'd1', 60_000)).toBe(true);
    const errors = [{ code: 'duplicate_custom_id', message: 'dup', param: 'custom_id', line: 2 }];
    expect(await b.failBatch(batch, 'd2', errors)).toBe(false);
    expect(await b.failBatch(batch, 'd1', errors)).toBe(true);
    const got = await b.getBatch('acme', batch.id);
    expect(got).toMatchObject({ status: 'failed', errors, outputFileId: null, errorFileId: null });
    expect(got!.failedAt).not.toBeNull();
    expect((await b.listFiles('acme')).data).toHaveLength(1); // the input only
  });

  it('lines enqueued with their requests, each result written once, then completed with its output and error files', async () => {
    const { batch } = await newBatch();
    const b = t.store.batches;
    await b.leaseBatches('d1', 60_000, 10);
    expect(await b.startBatch(batch.id, 'd1', 2)).toBe(true);
    const lines = [
      { lineNo: 1, customId: 'a', requestId: `${batch.id}:1` },
      { lineNo: 2, customId: 'b', requestId: `${batch.id}:2` },
    ];
    const reqs: NewRequest[] = lines.map((l) => ({
      id: l.requestId,
      token: 't',
      queue: 'q',
      deadline: batch.deadline,
      envelope: '{}',
      payload: new Uint8Array(),
    }));
    expect(await b.enqueueLines(batch.id, 'd1', 1, 2, lines, reqs)).toBe(false); // cursor is at 0
    expect(await b.enqueueLines(batch.id, 'd1', 0, 2, lines, reqs)).toBe(true);
    expect(await b.enqueueLines(batch.id, 'd1', 0, 2, lines, reqs)).toBe(false); // done already: nothing twice
    await t.store.acquirePartitions('q', 'o', at(100), 60_000, 64);
    const got = await t.store.dispatch('q', 'o', at(100), 10);
    expect(got.map((r) => r.id).sort()).toEqual(lines.map((l) => l.requestId).sort());
    await t.store.ack(
      'o',
      got.map((r) => ({ ...stampOf(r), route: `batch:${batch.id}`, payload: r.id })),
    );
    const results = await t.store.peekResults(`batch:${batch.id}`, 100, 10);
    const rendered: BatchLineResult[] = results.map((r) => ({
      lineNo: Number(r.id.split(':')[1]),
      ok: r.id.endsWith(':1'),
      line: line(`{"r":"${r.id}"}`),
      promptTokens: 3,
      completionTokens: 4,
    }));
    const seqs = results.map((r) => r.seq);
    expect((await b.recordResults(batch.id, rendered, seqs)).sort()).toEqual([1, 2]);
    expect(await b.recordResults(batch.id, rendered, seqs)).toEqual([]); // a second writer writes nothing
    expect(await t.store.resultDepth(`batch:${batch.id}`)).toBe(0);
    expect(await b.markFinalizing(batch.id, 'd1')).toBe(true);
    const done = await b.finishBatch(batch.id, 'd1', 'completed');
    expect(done).toMatchObject({ status: 'completed', total: 2, completed: 1, failed: 1, promptTokens: 6, completionTokens: 8 });
    expect(await text(await b.readFile('acme', done!.outputFileId!))).toBe(`{"r":"${batch.id}:1"}\n`);
    expect(await text(await b.readFile('acme', done!.errorFileId!))).toBe(`{"r":"${batch.id}:2"}\n`);
    expect(await b.leaseBatches('d1', 60_000, 10)).toEqual([]); // finished: nobody drives it
  });

  it('a cancelling batch records its lines not enqueued yet without their requests, and settles them cancelled', async () => {
    const { batch } = await newBatch();
    const b = t.store.batches;
    await b.leaseBatches('d1', 60_000, 10);
    await b.startBatch(batch.id, 'd1', 2);
    const lines = [
      { lineNo: 1, customId: 'a', requestId: `${batch.id}:1` },
      { lineNo: 2, customId: 'b', requestId: `${batch.id}:2` },
    ];
    const req = { id: lines[0]!.requestId, token: 't', queue: 'q', deadline: batch.deadline, envelope: '{}', payload: new Uint8Array() };
    await expect(b.enqueueLines(batch.id, 'd1', 0, 2, lines, [req])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' }); // one per line, or none
    expect(await b.enqueueLines(batch.id, 'd1', 0, 1, lines.slice(0, 1), [req])).toBe(true);
    await b.cancelBatch('acme', batch.id);
    expect(await b.enqueueLines(batch.id, 'd1', 1, 2, lines.slice(1), [])).toBe(true);
    expect((await t.store.backlog('q', 0, [])).depth).toBe(1); // the second line's request was never enqueued
    expect(await b.settleLeftovers(batch.id, 'cancelled', 'batch_cancelled', 'cancelled', true)).toBe(2);
    expect(await b.finishBatch(batch.id, 'd1', 'cancelled')).toMatchObject({ status: 'cancelled', failed: 2 });
  });

  it('cancel: pending lines settled as cancelled in the error file; no output file when nothing completed', async () => {
    const { batch } = await newBatch();
    const b = t.store.batches;
    await b.leaseBatches('d1', 60_000, 10);
    await b.startBatch(batch.id, 'd1', 2);
    const lines = [
      { lineNo: 1, customId: 'a', requestId: `${batch.id}:1` },
      { lineNo: 2, customId: 'b', requestId: `${batch.id}:2` },
    ];
    const reqs = lines.map((l) => ({
      id: l.requestId,
      token: 't',
      queue: 'q',
      deadline: batch.deadline,
      envelope: '{}',
      payload: new Uint8Array(),
    }));
    await b.enqueueLines(batch.id, 'd1', 0, 2, lines, reqs);
    expect((await b.cancelBatch('acme', batch.id))!.status).toBe('cancelling');
    expect(await b.pendingRequests(batch.id)).toEqual(lines);
    // A page of results looks up only its own lines (unknown and other batches' numbers: nothing).
    expect(await b.pendingLines(batch.id, [2, 7])).toEqual([lines[1]]);
    expect(await b.pendingLines(batch.id, [])).toEqual([]);
    expect(await b.pendingLines('batch_other', [1, 2])).toEqual([]);
    await expect(b.pendingLines(batch.id, [0])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await b.finishBatch(batch.id, 'd1', 'cancelled')).toBeUndefined(); // lines still pending
    await t.store.acquirePartitions('q', 'o', at(100), 60_000, 64);
    const inFlight = await t.store.dispatch('q', 'o', at(100), 1);
    expect(inFlight).toHaveLength(1);
    // A cancel spares the line in flight: its answer is still to come.
    expect(await b.settleLeftovers(batch.id, 'cancelled', 'batch_cancelled', 'the batch was cancelled', true)).toBe(1);
    expect((await b.pendingRequests(batch.id)).map((p) => p.requestId)).toEqual([inFlight[0]!.id]);
    const spared = Number(inFlight[0]!.id.split(':')[1]);
    expect((await b.pendingLines(batch.id, [1, 2])).map((p) => p.lineNo)).toEqual([spared]); // the settled line is no longer pending
    expect(await b.settleLeftovers(batch.id, 'cancelled', 'batch_cancelled', 'the batch was cancelled')).toBe(1);
    const done = await b.finishBatch(batch.id, 'd1', 'cancelled');
    expect(done).toMatchObject({ status: 'cancelled', failed: 2, outputFileId: null });
    const errors = (await text(await b.readFile('acme', done!.errorFileId!)))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { custom_id: string; error: unknown });
    expect(errors.map((e) => e.custom_id).sort()).toEqual(['a', 'b']);
    expect(errors[0]!.error).toEqual({ code: 'batch_cancelled', message: 'the batch was cancelled' });
    expect((await b.cancelBatch('acme', batch.id))!.status).toBe('cancelled');
  });
});
