import { beforeEach, describe, expect, it } from 'vitest';
import { stampOf, type Completion, type Request } from '../src/index.js';
import { at, req, token, useTestStore } from './requests/helpers.js';

const t = useTestStore({ resetQueue: 'q' });
beforeEach(async () => {
  await t.store.acquirePartitions('q', 'a', NOW, 600_000, 64);
});

const NOW = at(1_000);

function done(r: { id: string; token: string; attempt: number }, payload = 'ok', over: Partial<Completion> = {}): Completion {
  return { id: r.id, token: r.token, attempt: r.attempt, route: 'out', payload, ...over };
}

async function dispatchAll(): Promise<Request[]> {
  return t.store.dispatch('q', 'a', NOW, 1000);
}

describe('ack', () => {
  it('reports an exact boolean vector for duplicates, stale attempts and unknown keys', async () => {
    await t.store.enqueue([req('a1'), req('a2'), req('a3')]);
    const [r1, r2, r3] = await dispatchAll();
    const unknown = { id: 'nope', token: token(), attempt: 1 };
    const result = await t.store.ack('a', [
      done(r1!, 'first'), // 0: true
      done(r1!, 'again'), // 1: duplicate, same attempt → false
      done({ ...r2!, attempt: r2!.attempt - 1 }), // 2: lower attempt → false...
      done(r2!, 'higher'), // 3: ...the higher one later takes the slot → true
      done(unknown), // 4: unknown → false
      done(r3!, 'x', { route: 'other' }), // 5: true
    ]);
    expect(result).toEqual([true, false, false, true, false, true]);
    expect(await t.store.ack('a', [done(r1!)])).toEqual([false]); // already acked
    const out = await t.store.popResults('out', 1_000, 10);
    expect(out.map((r) => [r.id, r.token, r.payload])).toEqual([
      [r1!.id, r1!.token, 'first'],
      [r2!.id, r2!.token, 'higher'],
    ]);
    expect((await t.store.popResults('other', 1_000, 10)).map((r) => r.payload)).toEqual(['x']);
    expect(await t.store.hasRequests('q')).toBe(false);
    expect(await t.store.ack('a', [])).toEqual([]);
  });

  it('of several duplicates the highest attempt wins, wherever it is', async () => {
    await t.store.enqueue([req('d')]);
    const [r] = await dispatchAll();
    expect(await t.store.ack('a', [done({ ...r!, attempt: r!.attempt + 5 }), done(r!), done({ ...r!, attempt: r!.attempt + 5 })])).toEqual([
      false,
      false,
      false,
    ]);
  });

  it('another owner cannot ack', async () => {
    await t.store.enqueue([req('o')]);
    const [r] = await dispatchAll();
    expect(await t.store.ack('b', [done(r!)])).toEqual([false]);
    expect(await t.store.ack('a', [done(r!)])).toEqual([true]);
  });

  it('acks racing for one stamp: exactly one wins', async () => {
    await t.store.enqueue(Array.from({ length: 10 }, (_, i) => req(`race-${i}`)));
    const got = await dispatchAll();
    const results = await Promise.all(got.map((r) => Promise.all([t.store.ack('a', [done(r)]), t.store.ack('a', [done(r)])])));
    for (const [[x], [y]] of results) expect([x, y].filter(Boolean)).toHaveLength(1);
    expect(await t.store.resultDepth('out')).toBe(10);
  });

  it('an ack that waited on a row another transaction changed still applies to the new row version', async () => {
    await t.store.enqueue([req('waited'), req('bounced')]);
    const [w, b] = await dispatchAll();
    const holder = await t.schema.pool().connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`UPDATE q_requests SET cancelled = 1 WHERE id = 'waited'`); // still in flight
      await holder.query(`UPDATE q_requests SET dispatch_epoch = 0 WHERE id = 'bounced'`); // back to pending
      const acking = t.store.ack('a', [done(w!), done(b!)]);
      await new Promise((r) => setTimeout(r, 200)); // the ack now waits on both row locks
      await holder.query('COMMIT');
      expect(await acking).toEqual([true, false]);
    } finally {
      holder.release();
    }
    const { rows } = await t.schema.pool().query(`SELECT id FROM q_requests ORDER BY id`);
    expect(rows).toEqual([{ id: 'bounced' }]);
    expect((await t.store.popResults('out', 1_000, 10)).map((r) => r.id)).toEqual(['waited']);
  });

  it('a pending request cannot be acked', async () => {
    await t.store.enqueue([req('p')]);
    const [r] = await dispatchAll();
    await t.store.undispatch('a', [stampOf(r!)]);
    expect(await t.store.ack('a', [done(r!)])).toEqual([false]);
  });
});

describe('retry, undispatch, defer', () => {
  it('a retry under the same epoch draws a new attempt and fences the old stamp', async () => {
    await t.store.enqueue([req('r', { envelope: '{"try":0}', payload: Buffer.from([1, 2, 3]) })]);
    const [first] = await dispatchAll();
    expect(await t.store.retry('a', stampOf(first!), 1_000, '{"try":1}')).toBe(true);
    expect(await t.store.retry('a', stampOf(first!), 1_000, '{"try":9}')).toBe(false); // no longer in flight
    const [second] = await dispatchAll();
    expect(second!.epoch).toBe(first!.epoch);
    expect(second!.attempt).toBeGreaterThan(first!.attempt);
    expect(second!.envelope).toBe('{"try":1}');
    expect([...second!.payload]).toEqual([1, 2, 3]);
    expect(await t.store.ack('a', [done(first!)])).toEqual([false]);
    expect(await t.store.retry('a', stampOf(first!), 1_000, '{}')).toBe(false);
    await t.store.undispatch('a', [stampOf(first!)]);
    expect(await t.store.inFlight('q', 'a')).toEqual([stampOf(second!)]);
    expect(await t.store.ack('a', [done(second!)])).toEqual([true]);
  });

  it('retry parks until notBefore with the new envelope; other owners are fenced', async () => {
    await t.store.enqueue([req('park')]);
    const [r] = await dispatchAll();
    expect(await t.store.retry('b', stampOf(r!), 2_000, '{"b":1}')).toBe(false);
    expect(await t.store.retry('a', stampOf(r!), 2_000, '{"a":1}')).toBe(true);
    expect(await t.store.dispatch('q', 'a', at(1_999), 10)).toEqual([]);
    expect(await t.store.hasRequests('q')).toBe(true); // parked is pending
    const [again] = await t.store.dispatch('q', 'a', at(2_000), 10);
    expect(again!.envelope).toBe('{"a":1}');
  });

  it('undispatch keeps deadline order and fences older attempts', async () => {
    await t.store.enqueue([req('u1', { deadline: 10 }), req('u2', { deadline: 20 }), req('u3', { deadline: 30 })]);
    const first = await dispatchAll();
    await t.store.undispatch('a', [stampOf(first[0]!), stampOf(first[0]!), stampOf(first[2]!)]); // dupes are fine
    const second = await dispatchAll();
    expect(second.map((r) => r.id)).toEqual(['u1', 'u3']);
    // The first attempts are fenced now: undispatching them does nothing.
    await t.store.undispatch('a', [stampOf(first[0]!), stampOf(first[2]!)]);
    expect((await t.store.inFlight('q', 'a')).length).toBe(3);
    // Another owner cannot undispatch.
    await t.store.undispatch('b', second.map(stampOf));
    expect((await t.store.inFlight('q', 'a')).length).toBe(3);
    await t.store.undispatch('a', [...second, first[1]!].map(stampOf));
    expect((await dispatchAll()).map((r) => r.id)).toEqual(['u1', 'u2', 'u3']);
  });

  it('defer returns requests to pending until notBefore, keeping envelope and payload', async () => {
    await t.store.enqueue([req('f1', { envelope: 'e1' }), req('f2')]);
    const got = await dispatchAll();
    await t.store.defer('b', got.map(stampOf), 5_000); // not b's
    expect((await t.store.inFlight('q', 'a')).length).toBe(2);
    await t.store.defer('a', got.map(stampOf), 5_000);
    expect(await t.store.inFlight('q', 'a')).toEqual([]);
    expect(await t.store.dispatch('q', 'a', at(4_999), 10)).toEqual([]);
    const again = await t.store.dispatch('q', 'a', at(5_000), 10);
    expect(again.map((r) => [r.id, r.envelope, Buffer.from(r.payload).toString()])).toEqual([
      ['f1', 'e1', 'f1'],
      ['f2', '{}', 'f2'],
    ]);
    await t.store.defer('a', [], 1); // empty: no-op
  });
});

describe('cancel', () => {
  it('cancels every stored generation of an id; a resubmission starts clean', async () => {
    const g1 = req('c'),
      g2 = req('c'),
      other = req('keep');
    await t.store.enqueue([g1, g2, other]);
    const [d1] = await t.store.dispatch('q', 'a', NOW, 1); // g1 in flight, g2 pending
    await expect(t.store.cancel(['c', ''])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await t.store.cancel(['c', 'unknown']);
    const keys = [g1, g2, other, { id: 'c', token: 'never' }].map((r) => ({ id: r.id, token: r.token }));
    const cancelled = await t.store.cancelledKeys(keys);
    expect(cancelled).toEqual([
      { id: 'c', token: g1.token },
      { id: 'c', token: g2.token },
    ]);
    const g3 = req('c');
    await t.store.enqueue([g3]);
    expect(await t.store.cancelledKeys([{ id: 'c', token: g3.token }])).toEqual([]);
    const rest = await dispatchAll();
    expect(rest.map((r) => [r.token, r.cancelled])).toEqual(
      expect.arrayContaining([
        [g2.token, true],
        [g3.token, false],
        [other.token, false],
      ]),
    );
    expect(d1!.cancelled).toBe(false); // it was dispatched before the cancel
    expect(await t.store.cancelledKeys([])).toEqual([]);
    await t.store.cancel([]);
  });

  it('resolves with the ids it cancelled: unknown and already-cancelled ids are not among them', async () => {
    await t.store.enqueue([req('x1'), req('x1'), req('x2')]);
    expect((await t.store.cancel(['x1', 'x2', 'nope', 'x1'])).sort()).toEqual(['x1', 'x2']);
    expect(await t.store.cancel(['x1', 'nope'])).toEqual([]);
    await t.store.enqueue([req('x1')]); // a later generation starts uncancelled
    expect(await t.store.cancel(['x1'])).toEqual(['x1']);
    expect(await t.store.cancel([])).toEqual([]);
  });
});

describe('results', () => {
  async function ackN(n: number, route = 'out', expiresAt = 0): Promise<void> {
    await t.store.enqueue(Array.from({ length: n }, (_, i) => req(`res-${route}-${i}`, { deadline: i })));
    const got = await dispatchAll();
    expect(
      await t.store.ack(
        'a',
        got.map((r) => done(r, r.id, { route, expiresAt })),
      ),
    ).toEqual(got.map(() => true));
  }

  it('popResults drains a route in seq order', async () => {
    await ackN(25);
    expect(await t.store.resultDepth('out')).toBe(25);
    const a = await t.store.popResults('out', 1_000, 10);
    const b = await t.store.popResults('out', 1_000, 100);
    const all = [...a, ...b];
    expect(a).toHaveLength(10);
    expect(all.map((r) => r.payload)).toEqual(Array.from({ length: 25 }, (_, i) => `res-out-${i}`));
    expect(all.every((r, i) => i === 0 || r.seq > all[i - 1]!.seq)).toBe(true);
    expect(await t.store.resultDepth('out')).toBe(0);
    expect(await t.store.popResults('out', 1_000, 10)).toEqual([]);
  });

  it('peekResults shows what the next pop returns, in seq order, and leaves it in place; expired results are skipped', async () => {
    await ackN(4, 'pk', 0);
    await ackN(2, 'pk-ttl', 500);
    const peeked = await t.store.peekResults('pk', 1_000, 3);
    expect(peeked.map((r) => r.payload)).toEqual(['res-pk-0', 'res-pk-1', 'res-pk-2']);
    expect(await t.store.resultDepth('pk')).toBe(4);
    expect(await t.store.popResults('pk', 1_000, 3)).toEqual(peeked);
    expect(await t.store.peekResults('pk-ttl', 501, 10)).toEqual([]);
    expect(await t.store.resultDepth('pk-ttl')).toBe(2); // a peek deletes nothing, expired or not
    expect(await t.store.peekResults('pk', 1_000, 0)).toEqual([]);
    await expect(t.store.peekResults('pk', 1_000, -1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('4 concurrent poppers get disjoint results and together all of them', async () => {
    await ackN(200);
    const seen: number[] = [];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (;;) {
          const got = await t.store.popResults('out', 1_000, 7);
          if (got.length === 0) return;
          seen.push(...got.map((r) => r.seq));
        }
      }),
    );
    expect(seen).toHaveLength(200);
    expect(new Set(seen).size).toBe(200);
  });

  it('drops expired results (0 < expiresAt < now) instead of returning them', async () => {
    await ackN(3, 'ttl', 500);
    await ackN(2, 'ttl2', 0);
    expect(await t.store.resultDepth('ttl')).toBe(3);
    expect(await t.store.popResults('ttl', 500, 10)).toHaveLength(3); // expiring exactly now is live
    await ackN(3, 'ttl3', 500);
    expect(await t.store.popResults('ttl3', 501, 10)).toEqual([]);
    expect(await t.store.resultDepth('ttl3')).toBe(0);
    expect(await t.store.popResults('ttl2', 1e9, 10)).toHaveLength(2); // 0 never expires
  });

  it('expireResults deletes up to limit expired results on any route', async () => {
    await ackN(3, 'e1', 100);
    await ackN(3, 'e2', 100);
    await ackN(2, 'e3', 0);
    await ackN(2, 'e4', 200);
    expect(await t.store.expireResults(150, 4)).toBe(4);
    expect(await t.store.expireResults(150, 100)).toBe(2);
    expect(await t.store.expireResults(150, 100)).toBe(0);
    expect(await t.store.resultDepth('e3')).toBe(2);
    expect(await t.store.resultDepth('e4')).toBe(2);
    expect(await t.store.expireResults(150, 0)).toBe(0);
  });
});

describe('backlog and hasRequests', () => {
  it('count pending requests only, per queue, with expiring windows', async () => {
    await t.store.ensurePartitions('q2');
    expect(await t.store.hasRequests('q')).toBe(false);
    expect(await t.store.backlog('q', 1_000, [10, 100])).toEqual({ depth: 0, cancelled: 0, expiring: [0, 0] });
    await t.store.enqueue([
      req('b1', { deadline: 1_000 }),
      req('b2', { deadline: 1_010 }),
      req('b3', { deadline: 1_011 }),
      req('b4', { deadline: 1_100 }),
      req('b5', { deadline: 5_000 }),
      req('other', { queue: 'q2', deadline: 0 }),
    ]);
    expect(await t.store.hasRequests('q')).toBe(true);
    expect(await t.store.backlog('q', 1_000, [0, 10, 100, 0])).toEqual({ depth: 5, cancelled: 0, expiring: [1, 2, 4, 1] });
    expect(await t.store.backlog('q', 1_000, [])).toEqual({ depth: 5, cancelled: 0, expiring: [] });
    // In-flight requests are not waiting.
    await t.store.dispatch('q', 'a', NOW, 2);
    expect(await t.store.backlog('q', 1_000, [100])).toEqual({ depth: 3, cancelled: 0, expiring: [2] });
    await t.store.dispatch('q', 'a', NOW, 10);
    expect(await t.store.hasRequests('q')).toBe(false);
    expect(await t.store.hasRequests('q2')).toBe(true);
    expect(await t.store.backlog('q', 1_000, [100])).toEqual({ depth: 0, cancelled: 0, expiring: [0] });
  });

  it('counts cancelled requests apart, pending or in flight, until they are answered', async () => {
    await t.store.enqueue([req('c1', { deadline: 1_000 }), req('c2', { deadline: 1_010 }), req('c3', { deadline: 1_020 })]);
    const [first] = await t.store.dispatch('q', 'a', NOW, 1);
    expect(first?.id).toBe('c1');
    expect(await t.store.cancel(['c1', 'c3'])).toEqual(expect.arrayContaining(['c1', 'c3']));
    // c1 in flight and c3 pending are cancelled; only c2 is work waiting, and only it expires.
    expect(await t.store.backlog('q', 1_000, [100])).toEqual({ depth: 1, cancelled: 2, expiring: [1] });
  });
});
