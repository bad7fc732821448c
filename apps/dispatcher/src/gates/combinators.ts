// The gate combinators of docs/design/dispatcher.md#gates (composite, wait-on-refuse): they only
// wrap other gates, so they know nothing of metrics or parameters.
import { CONTINUE, type Gate, type GateRelease, type Verdict } from './types.js';

/** Budget = min of the inner budgets; apply = all or nothing (docs/design/dispatcher.md#gates ApplyChain). */
export function composite(gates: Gate[]): Gate {
  return {
    async budget() {
      let b = 1;
      for (const g of gates) b = Math.min(b, await g.budget());
      return b;
    },
    async apply(msg, releases, signal) {
      const mine: GateRelease[] = [];
      for (const g of gates) {
        let v: Verdict;
        try {
          v = await g.apply(msg, mine, signal);
        } catch (err) {
          for (const r of mine.reverse()) r();
          throw err;
        }
        if (v.kind !== 'continue') {
          // Partial grants of the earlier gates go back at once.
          for (const r of mine.reverse()) r();
          return v;
        }
      }
      releases.push(...mine);
      return CONTINUE;
    },
  };
}

/** Turns the inner gate's Refuse into Wait (the message is parked in memory instead of going back). */
export function waitOnRefuse(inner: Gate): Gate {
  return {
    budget: () => inner.budget(),
    async apply(msg, releases, signal) {
      const v = await inner.apply(msg, releases, signal);
      return v.kind === 'refuse' ? { kind: 'wait' } : v;
    },
  };
}
