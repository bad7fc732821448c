import { describe, expect, it } from 'vitest';
import type { ScenarioResult } from '../src/harness.js';
import { barsOf } from '../src/report/chart.js';
import { capNotes, resultsTable } from '../src/report/markdown.js';

/** A wait scenario whose peer hit the cap in one of two runs (its median too). */
function capped(): ScenarioResult {
  const metric = { key: 'delay', unit: 'ms', better: 'lower' as const, cap: 30_000, capNote: 'B had not started' };
  const sys = (system: string, values: number[]) => ({
    system,
    samples: values.map((delay) => ({ delay })),
    summary: { delay: { min: Math.min(...values), median: Math.max(...values), max: Math.max(...values), n: values.length } },
  });
  return {
    name: 'wait',
    title: 'wait',
    baseline: 'q',
    metrics: [metric],
    systems: [sys('q', [40, 50]), sys('peer', [20_000, 30_000])],
    ratios: [{ metric: 'delay', system: 'peer', advantage: 600 }],
  };
}

describe('capped figures', () => {
  it('are marked ≥ in the table, the ratio a lower bound, with a note saying how many runs', () => {
    const table = resultsTable([capped()]);
    expect(table).toContain('| 20,000 ms | **≥30,000 ms** | ≥30,000 ms | 2 | ≥600.00× |');
    expect(table).toContain('| 40 ms | **50 ms** | 50 ms | 2 | (baseline) |');
    expect(capNotes([capped()])).toBe('- ≥ in wait delay: capped at 30,000 ms: B had not started — peer in 1 of 2 run(s).');
    expect(barsOf([capped()])).toEqual([{ label: 'wait vs peer', advantage: 600, mark: '≥' }]);
  });
});
