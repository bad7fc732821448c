// RequestStore.dispatchAnswerable (issue 35 item 3): a dispatcher whose admission gate is closed still
// stamps — and so can answer — requests whose deadline passed or that were cancelled, and only
// those, from its own active partitions, earliest deadline first.
import { describe, expect, it } from 'vitest';
import { isQError } from '@q/schema';
import { stampOf } from '../src/index.js';
import { at, req, useTestStore } from './requests/helpers.js';

const t = useTestStore({ resetQueue: 'q' });

const NOW = at(1_000);

describe('dispatchAnswerable', () => {
  it('stamps only expired and cancelled due requests, earliest deadline first; the rest stay pending', async () => {
    await t.store.ensurePartitions('q');
    expect(await t.store.acquirePartitions('q', 'a', NOW, 60_000, 64)).toHaveLength(64);
    await t.store.enqueue([
      req('live', { deadline: 2_000 }),
      req('cancelled', { deadline: 3_000 }),
      req('expired', { deadline: 1_000 }),
      req('expired-earlier', { deadline: 900 }),
      req('live-later', { deadline: 4_000 }),
    ]);
    expect((await t.store.cancel(['cancelled'])).sort()).toEqual(['cancelled']);
    const got = await t.store.dispatchAnswerable('q', 'a', NOW, 10);
    expect(got.map((r) => [r.id, r.cancelled])).toEqual([
      ['expired-earlier', false],
      ['expired', false],
      ['cancelled', true],
    ]);
    // Stamped like dispatch: acking them works, and the live request is still there to dispatch.
    expect(
      await t.store.ack(
        'a',
        got.map((r) => ({ ...stampOf(r), route: 'out', payload: '"x"' })),
      ),
    ).toEqual([true, true, true]);
    expect((await t.store.dispatch('q', 'a', NOW, 10)).map((r) => r.id).sort()).toEqual(['live', 'live-later']);
  });

  it('takes nothing from partitions the owner does not hold, and refuses bad input before any statement', async () => {
    await t.store.ensurePartitions('q');
    await t.store.enqueue([req('old', { deadline: 10 })]);
    expect(await t.store.dispatchAnswerable('q', 'nobody', NOW, 10)).toEqual([]);
    const err = await t.store.dispatchAnswerable('q', 'a', NOW, -1).catch((e: unknown) => e);
    expect(isQError(err) && err.code === 'INVALID_ARGUMENT').toBe(true);
  });
});
