// Which claims interleave groups and hold per-group limits, and what they pass (the SQL is
// sql/claim-grouped-jobs.ts).
//
// A claim with limits is always grouped: a plain claim knows nothing of them. Without limits a
// claim is grouped only for fairness, and only once a claim of its queues has returned a job with
// a group (then for FAIR_HOLD_MS after the last one): a store whose jobs carry no group keeps the
// plain claim, its start positions and its cost. The first claim that meets a backlog of groups
// is the plain one, so a group may wait one claim round behind another's backlog, no more.
//
// Per queue the store keeps where the walk of groups ended (the next walk starts after it, so
// every group is reached however many there are), and, per rule whose concurrency is a function,
// the limits it computed for groups it has seen (at most KNOWN_CAPS of them, the least recently
// seen forgotten first). A group not known falls back to 1, which never admits more than the
// function would: process-side bookkeeping only ever admits less.
import type { Attributes } from '@opentelemetry/api';
import type { JobGroupMetrics } from '@q/otel';
import { invalidArgument } from '@q/schema';
import { checkName } from '@q/schema/internal';
import type { ClaimedRows } from './claim-starts.js';
import type { ClaimGroupsInput } from './sql/claim-grouped-jobs.js';
import type { ClaimOptions, GroupLimit, LeasedJob } from './types.js';

/** After a claim returned a job with a group, claims of its queues stay grouped this long (ms). */
export const FAIR_HOLD_MS = 60_000;
/** Limits computed by function rules that a store keeps (least recently seen forgotten first). */
export const KNOWN_CAPS = 1_000;

const INT32_MAX = 2_147_483_647;

/** A checked limit rule. */
interface Rule {
  queue: string | null;
  type: string | null;
  /** Names the rule in a slot's scope: its queue and type, so every claimer derives the same. */
  id: string;
  concurrency: number | ((group: string) => number) | null;
  rate: { limit: number; windowMs: number } | null;
}

/** The group options of a claim, checked. */
export interface CheckedGroups {
  rules: Rule[];
  fair: boolean;
  weights: { group: string[]; weight: number[] };
}

const NO_WEIGHTS = { group: [], weight: [] };

/**
 * Checks `limits`, `fair` and `weights` of claim options as {@link JobStore.claim} does
 * (`INVALID_ARGUMENT` naming the first bad one): for a claimer that takes them when it is built.
 */
export function checkGroupOptions(opts: Pick<ClaimOptions, 'limits' | 'fair' | 'weights'>, op = 'claim'): CheckedGroups {
  const { limits, fair, weights } = opts;
  if (fair !== undefined && typeof fair !== 'boolean') throw invalidArgument(`${op}: fair must be a boolean`);
  const rules: Rule[] = [];
  if (limits !== undefined) {
    if (!Array.isArray(limits)) throw invalidArgument(`${op}: limits must be an array of { queue?, type?, concurrency }`);
    limits.forEach((raw: GroupLimit, i) => {
      const at = `${op}: limits[${i}]`;
      if (!raw || typeof raw !== 'object') throw invalidArgument(`${op}: limits[${i}] must be an object`);
      const unknown = Object.keys(raw).filter((k) => k !== 'queue' && k !== 'type' && k !== 'concurrency' && k !== 'rate');
      if (unknown.length > 0) throw invalidArgument(`${op}: limits[${i}] must not have unknown option(s): ${unknown.join(', ')}`);
      const queue = raw.queue === undefined ? null : checkName(at, 'queue', raw.queue);
      const type = raw.type === undefined ? null : checkName(at, 'type', raw.type);
      const c = raw.concurrency;
      if (c === undefined && raw.rate === undefined) throw invalidArgument(`${op}: limits[${i}] must have a concurrency or a rate`);
      if (c !== undefined && typeof c !== 'function' && !(typeof c === 'number' && Number.isInteger(c) && c >= 0 && c <= INT32_MAX)) {
        throw invalidArgument(`${at}: concurrency must be an integer from 0 to ${INT32_MAX}, or a function of the group`);
      }
      rules.push({ queue, type, id: JSON.stringify([queue, type]), concurrency: c ?? null, rate: checkRate(at, raw.rate) });
    });
  }
  let w: CheckedGroups['weights'] = NO_WEIGHTS;
  if (weights !== undefined) {
    if (!weights || typeof weights !== 'object' || Array.isArray(weights))
      throw invalidArgument(`${op}: weights must be an object of group → weight`);
    w = { group: [], weight: [] };
    for (const [group, weight] of Object.entries(weights)) {
      checkName(`${op}: weights`, 'group', group);
      if (!Number.isInteger(weight) || weight < 1 || weight > INT32_MAX) {
        throw invalidArgument(`${op}: weights must be integers from 1 to ${INT32_MAX}`);
      }
      w.group.push(group);
      w.weight.push(weight);
    }
  }
  return { rules, fair: fair !== false, weights: w };
}

/** A rule's `rate` checked: `{ limit, windowMs }`, integers of at least 1, or null when absent. */
function checkRate(at: string, rate: GroupLimit['rate']): Rule['rate'] {
  if (rate === undefined) return null;
  if (!rate || typeof rate !== 'object') throw invalidArgument(`${at}: rate must be { limit, windowMs }`);
  const unknown = Object.keys(rate).filter((k) => k !== 'limit' && k !== 'windowMs');
  if (unknown.length > 0) throw invalidArgument(`${at}: rate must not have unknown option(s): ${unknown.join(', ')}`);
  for (const k of ['limit', 'windowMs'] as const) {
    const v = rate[k];
    if (!Number.isInteger(v) || v < 1 || v > INT32_MAX) throw invalidArgument(`${at}: rate.${k} must be an integer from 1 to ${INT32_MAX}`);
  }
  return { limit: rate.limit, windowMs: rate.windowMs };
}

/** The limit a function rule gives `group`: an integer of at least 1, else `INVALID_ARGUMENT`. */
function computeCap(rule: Rule, f: (group: string) => number, group: string): number {
  const v: unknown = f(group);
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > INT32_MAX) {
    throw invalidArgument(
      `claim: a concurrency function must return an integer from 1 to ${INT32_MAX} (the limit on ${rule.id} returned ${String(v)} for a group)`,
    );
  }
  return v;
}

/** The metric attributes naming a rule: its queue and type (`*`: any), never a group. */
function ruleAttributes(rule: Rule): Attributes {
  return { 'q.limit.queue': rule.queue ?? '*', 'q.limit.type': rule.type ?? '*' };
}

/** A store's per-queue state of grouped claims (see above), and the metrics of their limits. */
export class GroupClaims {
  readonly #metrics: JobGroupMetrics;

  constructor(metrics: JobGroupMetrics) {
    this.#metrics = metrics;
  }

  /** Per queue: until when (`performance.now()`) its claims stay grouped for fairness. */
  readonly #groupedUntil = new Map<string, number>();
  /** Per queue: the group the last walk ended at. */
  readonly #cursors = new Map<string, string>();
  /** Limits computed by function rules, by rule id and group (insertion order: least recently seen first). */
  readonly #caps = new Map<string, { rule: string; group: string; cap: number }>();
  /** A function rule's bad result, met after a claim: thrown by the next plan, before anything is sent. */
  #bad: Error | undefined;

  /** The grouped claim's input for `queues`, or undefined for a plain claim. */
  plan(queues: readonly string[], g: CheckedGroups, now = performance.now()): ClaimGroupsInput | undefined {
    const bad = this.#bad;
    this.#bad = undefined;
    if (bad !== undefined) throw bad;
    if (g.rules.length === 0 && !(g.fair && queues.some((q) => (this.#groupedUntil.get(q) ?? -Infinity) > now))) return undefined;
    const rules: ClaimGroupsInput['rules'] = { queue: [], type: [], id: [], cap: [], rate: [], windowMs: [] };
    const ruleIndex = new Map<string, number>();
    for (const r of g.rules) {
      rules.queue.push(r.queue);
      rules.type.push(r.type);
      rules.id.push(r.id);
      rules.cap.push(r.concurrency === null ? null : typeof r.concurrency === 'number' ? r.concurrency : 1);
      rules.rate.push(r.rate?.limit ?? null);
      rules.windowMs.push(r.rate?.windowMs ?? null);
      if (!ruleIndex.has(r.id)) ruleIndex.set(r.id, rules.id.length);
    }
    const caps: ClaimGroupsInput['caps'] = { rule: [], group: [], cap: [] };
    for (const c of this.#caps.values()) {
      const i = ruleIndex.get(c.rule);
      if (i === undefined || typeof g.rules[i - 1]?.concurrency !== 'function') continue;
      caps.rule.push(i);
      caps.group.push(c.group);
      caps.cap.push(c.cap);
    }
    return { cursors: queues.map((q) => this.#cursors.get(q) ?? null), rules, caps, weights: g.weights };
  }

  /**
   * Learns from a claim's jobs (which queues have groups, where the walk ended, the function
   * limits of new groups) and records the limits' grants, waits and refusals.
   */
  record(got: ClaimedRows, g: CheckedGroups, now = performance.now()): void {
    if (got.cursors) for (const [queue, group] of got.cursors) this.#cursors.set(queue, group);
    for (const job of got.jobs) {
      if (job.group === null) continue;
      if (g.fair) this.#groupedUntil.set(job.queue, now + FAIR_HOLD_MS);
      const rule = matching(g.rules, job);
      if (rule === undefined) continue;
      if (typeof rule.concurrency === 'function') this.#learnCap(rule, rule.concurrency, job.group);
      const attributes = ruleAttributes(rule);
      this.#metrics.grants.add(1, attributes);
      // The claim wrote updated_at: its own clock, as runAt's.
      this.#metrics.wait.record(Math.max(0, job.updatedAt.getTime() - job.runAt.getTime()) / 1000, attributes);
    }
    for (const r of got.refusals ?? []) {
      const rule = g.rules[r.rule - 1];
      if (rule !== undefined) this.#metrics.refusals.add(r.count, { ...ruleAttributes(rule), 'q.limit.kind': r.kind });
    }
  }

  // Never throws: the claim's jobs are leased by now and must reach the caller. A bad result
  // leaves the group at 1 and is thrown by the next plan.
  #learnCap(rule: Rule, f: (group: string) => number, group: string): void {
    const key = `${rule.id}\n${group}`;
    let known = this.#caps.get(key);
    this.#caps.delete(key);
    if (known === undefined) {
      try {
        known = { rule: rule.id, group, cap: computeCap(rule, f, group) };
      } catch (err) {
        this.#bad ??=
          err instanceof Error
            ? err
            : invalidArgument(`claim: a concurrency function must not throw (the limit on ${rule.id} threw a non-error)`);
        return;
      }
    }
    this.#caps.set(key, known);
    if (this.#caps.size > KNOWN_CAPS) {
      const oldest = this.#caps.keys().next();
      if (oldest.done !== true) this.#caps.delete(oldest.value);
    }
  }
}

/** The first rule matching a job's queue and type, as the claim statement chooses it. */
function matching(rules: readonly Rule[], job: LeasedJob): Rule | undefined {
  return rules.find((r) => (r.queue === null || r.queue === job.queue) && (r.type === null || r.type === job.type));
}
