import fc from 'fast-check';
import { expect, it } from 'vitest';
import type { Stamp } from '../src/index.js';
import { ALL, at, token, useTestStore } from './requests/helpers.js';

// Random interleavings of enqueue / dispatch / ack / retry / undispatch / release / acquire by
// three owners, some of them run concurrently, against the real database. However they
// interleave: no key is ever acked twice, and every key ends pending, in flight, or with
// exactly one result (and never both a row and a result).

const t = useTestStore({ maxConns: 6 });

const OWNERS = ['a', 'b', 'c'] as const;
type Owner = (typeof OWNERS)[number];
const TTL_MS = 10_000;

type Cmd =
  | { k: 'enqueue'; n: number }
  | { k: 'dispatch'; o: Owner; limit: number }
  | { k: 'ack'; o: Owner; picks: number[] }
  | { k: 'retry'; o: Owner; pick: number }
  | { k: 'undispatch'; o: Owner; picks: number[] }
  | { k: 'release'; o: Owner; mod: number; rem: number }
  | { k: 'acquire'; o: Owner; limit: number }
  | { k: 'heartbeat'; o: Owner }
  | { k: 'tick'; s: number };

const owner = fc.constantFrom(...OWNERS);
const picks = fc.array(fc.nat(50), { minLength: 1, maxLength: 4 });
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ k: fc.constant('enqueue' as const), n: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ k: fc.constant('dispatch' as const), o: owner, limit: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ k: fc.constant('ack' as const), o: owner, picks }),
  fc.record({ k: fc.constant('retry' as const), o: owner, pick: fc.nat(50) }),
  fc.record({ k: fc.constant('undispatch' as const), o: owner, picks }),
  fc.record({ k: fc.constant('release' as const), o: owner, mod: fc.integer({ min: 1, max: 4 }), rem: fc.nat(3) }),
  fc.record({ k: fc.constant('acquire' as const), o: owner, limit: fc.integer({ min: 1, max: 64 }) }),
  fc.record({ k: fc.constant('heartbeat' as const), o: owner }),
  fc.record({ k: fc.constant('tick' as const), s: fc.integer({ min: 1, max: 12 }) }),
);
/** A step runs one command, or two at once. */
const step = fc.array(cmd, { minLength: 1, maxLength: 2 });

it('no key is acked twice; every key ends pending, in flight, or with exactly one result', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
      const { store } = t;
      await store.truncateForTest();
      await store.ensurePartitions('q');
      let clock = 1_000_000; // Unix s, moved by 'tick'
      let seq = 0;
      const keys: string[] = [];
      const seen: Record<Owner, Stamp[]> = { a: [], b: [], c: [] };
      const acks = new Map<string, number>();
      const keyOf = (s: { id: string; token: string }) => `${s.id}/${s.token}`;
      const pick = (o: Owner, i: number): Stamp | undefined => (seen[o].length ? seen[o][i % seen[o].length] : undefined);

      const run = async (c: Cmd): Promise<void> => {
        const now = at(clock);
        switch (c.k) {
          case 'enqueue': {
            const batch = Array.from({ length: c.n }, () => ({
              id: `k${seq++}`,
              token: token(),
              queue: 'q',
              deadline: clock + (seq % 3),
              envelope: '{}',
              payload: Buffer.from('p'),
            }));
            await store.enqueue(batch);
            keys.push(...batch.map(keyOf));
            return;
          }
          case 'dispatch':
            seen[c.o].push(...(await store.dispatch('q', c.o, now, c.limit)).map((r) => ({ id: r.id, token: r.token, attempt: r.attempt })));
            return;
          case 'ack': {
            const chosen = c.picks.map((i) => pick(c.o, i)).filter((s): s is Stamp => s !== undefined);
            const res = await store.ack(
              c.o,
              chosen.map((s) => ({ ...s, route: 'out', payload: c.o })),
            );
            res.forEach((ok, i) => {
              if (ok) acks.set(keyOf(chosen[i]!), (acks.get(keyOf(chosen[i]!)) ?? 0) + 1);
            });
            return;
          }
          case 'retry': {
            const s = pick(c.o, c.pick);
            if (s) await store.retry(c.o, s, clock, '{"retry":true}');
            return;
          }
          case 'undispatch':
            await store.undispatch(
              c.o,
              c.picks.map((i) => pick(c.o, i)).filter((s): s is Stamp => s !== undefined),
            );
            return;
          case 'release':
            await store.releasePartitions(
              'q',
              c.o,
              ALL.filter((p) => p % c.mod === c.rem % c.mod),
            );
            return;
          case 'acquire': {
            const got = await store.acquirePartitions('q', c.o, now, TTL_MS, c.limit);
            await store.resetStale(
              'q',
              c.o,
              got.map((l) => l.partition),
            );
            return;
          }
          case 'heartbeat':
            await store.heartbeat('q', c.o, now, TTL_MS, true);
            return;
          case 'tick':
            clock += c.s;
            return;
        }
      };

      for (const s of steps) {
        await Promise.all(s.map(run));
        for (const [k, n] of acks) expect(n, `key ${k} acked ${n} times`).toBeLessThanOrEqual(1);
      }

      const pool = t.schema.pool();
      const rows = await pool.query<{ k: string; epoch: string }>(
        `SELECT id || '/' || request_token AS k, dispatch_epoch AS epoch FROM q_requests`,
      );
      const results = await pool.query<{ k: string; n: number }>(
        `SELECT id || '/' || request_token AS k, count(*)::int AS n FROM q_results GROUP BY 1`,
      );
      const rowOf = new Map(rows.rows.map((r) => [r.k, Number(r.epoch)]));
      const resultOf = new Map(results.rows.map((r) => [r.k, r.n]));
      expect(rows.rows.length + results.rows.length).toBe(keys.length);
      for (const k of keys) {
        const row = rowOf.get(k);
        const n = resultOf.get(k) ?? 0;
        if (row !== undefined) {
          expect(n, `${k} has a row and a result`).toBe(0);
          expect(row).toBeGreaterThanOrEqual(0); // pending (0) or in flight (> 0)
        } else {
          expect(n, `${k} has neither a row nor exactly one result`).toBe(1);
        }
        expect(acks.get(k) ?? 0).toBe(n);
      }
    }),
    { numRuns: 30 },
  );
});
