import { repeatedTimestamps, statement, type StatementScope } from '@q/schema/internal';
import { JOB_COLUMN_COUNT, leasedJobOf, type ClaimedAs } from '../row.js';
import type { ClaimedRows } from '../claim-starts.js';
import type { LeasedJob } from '../types.js';
import { CLAIM_COLUMNS, NOT_KEY_HELD, claimReturning, type ClaimInput, type ClaimParams } from './claim-jobs.js';
import { opaque, placeholders, type Queryable } from './db.js';

// A claim that interleaves groups and holds per-group concurrency limits (migration 0011). The
// plain claim (claim-jobs.ts) reads a queue in dequeue order, so a group with 10,000 queued jobs
// ahead of another group's one job takes every claim until it is drained. This one reads each
// group from its own head:
//
//   - `grp` walks the groups that have queued jobs, through q_jobs_group_dequeue_idx one index
//     probe per group (a loose index scan), at most `limit` of them per queue, starting after the
//     group the queue's previous grouped claim ended its walk at and wrapping around: so across
//     claims every group is reached, however many there are;
//   - `gcand` reads up to `k` claimable jobs of each walked group (k = limit / groups walked,
//     at least 1), and `main` the queue's head in dequeue order as the plain claim does (the
//     jobs without a group, and more of a lone group's);
//   - `rated` gives each candidate with a group the first limit rule matching its queue and type,
//     `scope` (md5 of the rule's id and the group, as a uuid) and `cap` (the rule's concurrency,
//     or the worker's value for that group);
//   - `free` lists, per scope, the slot numbers below the cap that no leased or running job
//     holds; a candidate takes the n-th free slot of its scope by its rank in it, or is left
//     queued (it uses no attempt: it was never leased). A claim admits into a scope only holding
//     a transaction-scoped advisory lock on it, taken without waiting (a scope another claim is
//     admitting into right now is skipped by this one: its jobs stay queued for the next), and
//     reads the scope's slots only then, with a snapshot of their own (`gheld` and `held`, through
//     the VOLATILE functions of migration 0013, whose header says why: the statement's own
//     snapshot let two claims deadlock). The partial unique index stays the fence (two claims
//     cannot hold one slot; a violation is sent again by the caller, as for a lock key);
//   - `pick` orders what is admitted by priority, then by the job's rank within its group divided
//     by the group's weight (round-robin: every group's first job, then every group's second…),
//     then dequeue order, and keeps `limit`. A candidate of a priority below what a group read
//     only in part (k rows, or `main` full) may still hold is left: order across priorities
//     stays exact.
//
// The leases are taken as the plain claim takes them, with the slot written on the row. Rows
// read but not picked are unlocked when the statement commits.

/** Placeholders of a grouped claim: the plain claim's but the start positions, and its own (constants, never input). */
interface GroupedParams extends Omit<ClaimParams, 'afterPriority' | 'afterRunAt' | 'afterId'> {
  /** Per queue, aligned with `queues`: the group the previous walk ended at (NULL: from the first). */
  cursors: string;
  /** The limit rules, aligned: queue (NULL: any), type (NULL: any), id, concurrency (NULL: none). */
  ruleQueue: string;
  ruleType: string;
  ruleId: string;
  ruleCap: string;
  /** The rules' rates (NULL: none): starts per window, and the window in ms. */
  ruleRate: string;
  ruleWindow: string;
  /** Per-group concurrency for a rule (1-based rule index, group, cap), aligned. */
  capRule: string;
  capGroup: string;
  capValue: string;
  /** Group weights of the round-robin, aligned (absent: 1). */
  weightGroup: string;
  weightValue: string;
}

/** The order {@link groupedClaimValues} sends a grouped claim's values in. */
const GROUPED_ORDER = [
  'queues',
  'limit',
  'workerId',
  'leaseMs',
  'status',
  'claimId',
  'cursors',
  'ruleQueue',
  'ruleType',
  'ruleId',
  'ruleCap',
  'ruleRate',
  'ruleWindow',
  'capRule',
  'capGroup',
  'capValue',
  'weightGroup',
  'weightValue',
] as const;

/** The placeholders from `$first` on (see {@link GROUPED_ORDER}). */
function groupedParams(first: number): GroupedParams {
  return placeholders(first, GROUPED_ORDER);
}

/** Advisory lock class of the per-scope admission lock (`q` `L` `I` `M`). */
const ADMISSION_LOCK_CLASS = 0x714c494d;

/** The scope of `group`'s concurrency slots under the rule with id `rule` (`limit_scope`). */
const scopeOf = (rule: string, group: string): string => `md5(${rule} || chr(10) || ${group})::uuid`;
/** The scope of `group`'s rate slots under the rule with id `rule` (`q_job_rate_slots.scope`). */
const rateScopeOf = (rule: string, group: string): string => `md5(${rule} || chr(10) || 'rate' || chr(10) || ${group})::uuid`;
/** Takes the admission lock of `scope` without waiting: whether this claim holds it now. */
const tryAdmit = (scope: string): string => `pg_try_advisory_xact_lock(${ADMISSION_LOCK_CLASS}, hashtext(${scope}::text))`;

/**
 * Whether this claim may admit into group `g` of the queue of rule `qr` (`qrule`): it takes
 * the admission lock of the group's scope, without waiting (true without a rule).
 */
const admits = (g: string): string =>
  `CASE WHEN qr.cap IS NOT NULL THEN ${tryAdmit(scopeOf('qr.id', g))}
        WHEN qr.rate IS NOT NULL THEN ${tryAdmit(rateScopeOf('qr.id', g))}
        ELSE true END`;

/**
 * A walk takes at most this many steps per group it may take (those other claims admit into
 * included), and at least {@link MIN_WALK_STEPS}: a claim of one job still gets past a few
 * groups that other workers' claims hold at that moment.
 */
const WALK_STEPS = 4;
const MIN_WALK_STEPS = 32;

/** The first group with queued jobs in queue `q.name` after `after` (SQL NULL: none), in index order. */
const nextGroup = (after: string): string =>
  `(SELECT j.job_group FROM __q_schema__.q_jobs j
     WHERE j.queue = q.name AND j.status = 'queued' AND j.job_group > ${after} ORDER BY j.job_group LIMIT 1)`;
const FIRST_GROUP = `(SELECT j.job_group FROM __q_schema__.q_jobs j
     WHERE j.queue = q.name AND j.status = 'queued' AND j.job_group IS NOT NULL ORDER BY j.job_group LIMIT 1)`;

/**
 * The first `t.wanted` slot numbers below `limit` that `t.used` does not hold, as an array: an
 * unnest of an array is planned as a few rows, where a generate_series of computed bounds is
 * planned as a thousand, and a plan that costly gets JIT-compiled on every execution (seconds).
 */
const freeSlots = (limit: string): string =>
  `ARRAY(SELECT f.slot FROM generate_series(0, least(${limit}, cardinality(t.used) + t.wanted) - 1) AS f(slot)
          WHERE f.slot <> ALL (t.used))`;

/** The CTEs of a grouped claim, ending in `pick(id, priority, run_at, scope, slot, walk)`. */
export function groupedClaimCtes(p: GroupedParams): string {
  const limit = opaque(p.limit, 'int8');
  // Rows read per group: the claim's limit shared by weight among the groups walked and the jobs
  // without one (weight 1).
  const share = (weight: string): string =>
    `greatest(1, ceil(${limit}::numeric * ${weight} / ((SELECT coalesce(sum(grp.weight), 0) FROM grp) + 1)))::int8`;
  return `
rules AS MATERIALIZED (
  SELECT k.* FROM unnest(${opaque(p.ruleQueue, 'text[]')}, ${opaque(p.ruleType, 'text[]')}, ${opaque(p.ruleId, 'text[]')},
                         ${opaque(p.ruleCap, 'int4[]')}, ${opaque(p.ruleRate, 'int4[]')}, ${opaque(p.ruleWindow, 'int4[]')})
    WITH ORDINALITY AS k(queue, type, id, cap, rate, win, i)
), caps AS MATERIALIZED (
  SELECT * FROM unnest(${opaque(p.capRule, 'int4[]')}, ${opaque(p.capGroup, 'text[]')}, ${opaque(p.capValue, 'int4[]')}) AS v(rule, grp, cap)
), qrule AS MATERIALIZED (
  -- Per queue, the rule every job of it takes whatever its type, when one does: the first rule
  -- matching the queue, if it names no type. Then a group's room under it is known before its
  -- jobs are read, and a group at its limit is not read at all.
  SELECT q.name AS queue, f.i, f.id, f.cap, f.rate, f.win
  FROM unnest(${opaque(p.queues, 'text[]')}) AS q(name)
  CROSS JOIN LATERAL (SELECT r.* FROM rules r WHERE r.queue IS NULL OR r.queue = q.name ORDER BY r.i LIMIT 1) f
  WHERE f.type IS NULL
), walked AS (
  -- A group another claim is admitting into right now (its scope's admission lock held) is
  -- stepped over, not counted: two claims sent together walk different groups.
  SELECT q.name AS queue, w.job_group, w.n
  FROM unnest(${opaque(p.queues, 'text[]')}, ${opaque(p.cursors, 'text[]')}) AS q(name, cursor)
  LEFT JOIN qrule qr ON qr.queue = q.name
  CROSS JOIN LATERAL (
    WITH RECURSIVE walk(job_group, n, taken, wrapped, mine) AS (
      SELECT s.g, 1, m.mine::int, s.wrapped, m.mine FROM (
        SELECT coalesce(a.g, ${FIRST_GROUP}) AS g, a.g IS NULL AS wrapped FROM (SELECT ${nextGroup('q.cursor')} AS g OFFSET 0) a
      ) s
      CROSS JOIN LATERAL (SELECT ${admits('s.g')} AS mine OFFSET 0) m
      WHERE s.g IS NOT NULL
      UNION ALL
      SELECT s.g, w.n + 1, w.taken + m.mine::int, s.wrapped, m.mine FROM walk w CROSS JOIN LATERAL (
        SELECT t.* FROM (
          SELECT coalesce(a.g, CASE WHEN NOT w.wrapped THEN ${FIRST_GROUP} END) AS g, w.wrapped OR a.g IS NULL AS wrapped
          FROM (SELECT ${nextGroup('w.job_group')} AS g OFFSET 0) a
        ) t
        WHERE t.g IS NOT NULL AND NOT (t.wrapped AND q.cursor IS NOT NULL AND t.g > q.cursor)
        OFFSET 0
      ) s
      CROSS JOIN LATERAL (SELECT ${admits('s.g')} AS mine OFFSET 0) m
      WHERE w.taken < ${limit} AND w.n < greatest(${limit} * ${WALK_STEPS}, ${MIN_WALK_STEPS})
    )
    SELECT walk.job_group, walk.n FROM walk WHERE walk.mine
  ) w
), gscope AS MATERIALIZED (
  -- Each walked group's weight, and its scopes under the queue's rule when one rule takes every
  -- job of the queue (qrule).
  SELECT w.*, coalesce(x.weight, 1) AS weight, u.scope, u.cap, u.rscope, u.rate, u.win
  FROM walked w
  LEFT JOIN LATERAL (
    SELECT x.weight FROM unnest(${opaque(p.weightGroup, 'text[]')}, ${opaque(p.weightValue, 'int4[]')}) AS x(grp, weight)
    WHERE x.grp = w.job_group LIMIT 1
  ) x ON true
  LEFT JOIN LATERAL (
    SELECT CASE WHEN qr.cap IS NOT NULL THEN ${scopeOf('qr.id', 'w.job_group')} END AS scope,
           coalesce((SELECT v.cap FROM caps v WHERE v.rule = qr.i AND v.grp = w.job_group LIMIT 1), qr.cap) AS cap,
           CASE WHEN qr.rate IS NOT NULL THEN ${rateScopeOf('qr.id', 'w.job_group')} END AS rscope,
           qr.rate, qr.win
    FROM qrule qr WHERE qr.queue = w.queue
  ) u ON true
), gheld AS MATERIALIZED (
  -- Their slots held, in one read for all of them (per scope, it would be a read per group),
  -- after the walk took their admission locks: see held.
  SELECT h.held_scope AS scope, h.held_slots AS used
  FROM __q_schema__.q_job_slots_held(ARRAY(SELECT g.scope FROM gscope g WHERE g.scope IS NOT NULL)) h
), grated AS MATERIALIZED (
  SELECT h.scope, array_agg(h.slot) AS used FROM __q_schema__.q_job_rate_slots h
  WHERE h.scope = ANY (ARRAY(SELECT g.rscope FROM gscope g WHERE g.rscope IS NOT NULL))
    AND h.started_at >= now() - h.window_ms * interval '1 millisecond'
  GROUP BY h.scope
), grp AS (
  SELECT g.*, coalesce(hc.used, '{}') AS used,
         greatest(0, least(coalesce(g.cap - cardinality(hc.used), g.cap, ${limit}), coalesce(g.rate - cardinality(hr.used), g.rate, ${limit}))) AS room
  FROM gscope g LEFT JOIN gheld hc ON hc.scope = g.scope LEFT JOIN grated hr ON hr.scope = g.rscope
), gcand AS (
  SELECT grp.n AS walk, ${share('grp.weight')} AS k, c.* FROM grp
  CROSS JOIN LATERAL (
    SELECT ${CLAIM_COLUMNS} FROM __q_schema__.q_jobs j
    WHERE j.queue = grp.queue AND j.job_group = grp.job_group AND j.status = 'queued' AND j.run_at <= now()
      AND ${NOT_KEY_HELD}
    ORDER BY j.priority DESC NULLS LAST, j.run_at, j.id
    LIMIT least(${share('grp.weight')}, grp.room)
    FOR UPDATE OF j SKIP LOCKED
  ) c
), ncand AS (
  SELECT c.* FROM unnest(${opaque(p.queues, 'text[]')}) AS q(name)
  CROSS JOIN LATERAL (
    SELECT ${CLAIM_COLUMNS} FROM __q_schema__.q_jobs j
    WHERE j.queue = q.name AND j.job_group IS NULL AND j.status = 'queued' AND j.run_at <= now() AND ${NOT_KEY_HELD}
    ORDER BY j.priority DESC NULLS LAST, j.run_at, j.id
    LIMIT ${share('1')}
    FOR UPDATE OF j SKIP LOCKED
  ) c
), cand AS (
  SELECT g.walk, g.k, ${CLAIM_COLUMNS.replace(/j\./g, 'g.')} FROM gcand g
  UNION ALL
  SELECT NULL, ${share('1')}, ${CLAIM_COLUMNS.replace(/j\./g, 'n.')} FROM ncand n
), rated AS (
  SELECT c.*, CASE WHEN r.cap IS NOT NULL THEN ${scopeOf('r.rule_id', 'c.job_group')} END AS scope,
         coalesce(o.cap, r.cap) AS cap,
         CASE WHEN r.rate IS NOT NULL THEN ${rateScopeOf('r.rule_id', 'c.job_group')} END AS rscope,
         r.rate, r.win, r.rule
  FROM cand c
  LEFT JOIN LATERAL (
    SELECT k.i AS rule, k.id AS rule_id, k.cap, k.rate, k.win FROM rules k
    WHERE c.job_group IS NOT NULL AND (k.queue IS NULL OR k.queue = c.queue) AND (k.type IS NULL OR k.type = c.job_type)
    ORDER BY k.i LIMIT 1
  ) r ON true
  LEFT JOIN LATERAL (SELECT v.cap FROM caps v WHERE v.rule = r.rule AND v.grp = c.job_group LIMIT 1) o ON true
), floors AS (
  -- The priorities below which a source read in part (k rows) may still hold a job it would
  -- admit: a group without a limit, or the jobs without a group.
  SELECT min(r.priority) AS floor FROM rated r WHERE r.scope IS NULL AND r.rscope IS NULL
  GROUP BY r.queue, r.job_group HAVING count(*) >= max(r.k)
), scopes AS MATERIALIZED (
  SELECT r.scope, max(r.cap) AS cap, count(*) AS wanted FROM rated r WHERE r.scope IS NOT NULL GROUP BY r.scope
), admitting AS MATERIALIZED (
  SELECT s.* FROM scopes s WHERE ${tryAdmit('s.scope')}
), rscopes AS MATERIALIZED (
  SELECT r.rscope, max(r.rate) AS rate, max(r.win) AS win, count(*) AS wanted FROM rated r WHERE r.rscope IS NOT NULL GROUP BY r.rscope
), radmitting AS MATERIALIZED (
  SELECT s.* FROM rscopes s WHERE ${tryAdmit('s.rscope')}
), rheld AS MATERIALIZED (
  -- Read now, holding their admission locks (migration 0013): see above.
  SELECT * FROM __q_schema__.q_job_rate_slots_used(ARRAY(SELECT a.rscope FROM radmitting a))
), rfree AS (
  -- A rate slot is free once its last start is more than the window ago (or it was never taken).
  SELECT t.rscope, t.win, f.slot, row_number() OVER (PARTITION BY t.rscope ORDER BY f.slot) AS nth
  FROM (SELECT a.*, coalesce(h.used_slots, '{}') AS used FROM radmitting a LEFT JOIN rheld h ON h.used_scope = a.rscope) t
  CROSS JOIN LATERAL unnest(${freeSlots('t.rate')}) AS f(slot)
), held AS MATERIALIZED (
  -- The slots of every scope admitted into: those the walk locked were read by gheld, the
  -- others (a rule naming a type) are read now, holding their locks.
  SELECT hc.scope, hc.used FROM gheld hc
  UNION ALL
  SELECT h.held_scope, h.held_slots FROM __q_schema__.q_job_slots_held(ARRAY(
    SELECT a.scope FROM admitting a WHERE NOT EXISTS (SELECT 1 FROM gscope g WHERE g.scope = a.scope))) h
), free AS (
  SELECT t.scope, f.slot, row_number() OVER (PARTITION BY t.scope ORDER BY f.slot) AS nth
  FROM (SELECT a.*, coalesce(h.used, '{}') AS used FROM admitting a LEFT JOIN held h ON h.scope = a.scope) t
  CROSS JOIN LATERAL unnest(${freeSlots('t.cap')}) AS f(slot)
), ranked AS (
  SELECT r.*,
         row_number() OVER (PARTITION BY r.scope ORDER BY r.priority DESC, r.run_at, r.id) AS in_scope,
         row_number() OVER (PARTITION BY r.rscope ORDER BY r.priority DESC, r.run_at, r.id) AS in_rscope,
         row_number() OVER (PARTITION BY r.lock_key ORDER BY r.priority DESC, r.run_at, r.id) AS in_key
  FROM rated r
), admitted AS (
  SELECT k.id, k.priority, k.run_at, k.queue, k.job_group, k.walk, k.scope, f.slot, k.rscope, rf.slot AS rslot, rf.win, k.rule
  FROM ranked k
  LEFT JOIN free f ON f.scope = k.scope AND f.nth = k.in_scope
  LEFT JOIN rfree rf ON rf.rscope = k.rscope AND rf.nth = k.in_rscope
  WHERE (k.lock_key IS NULL OR k.in_key = 1) AND (k.scope IS NULL OR f.slot IS NOT NULL) AND (k.rscope IS NULL OR rf.slot IS NOT NULL)
    AND k.priority >= coalesce((SELECT max(floors.floor) FROM floors), -2147483648)
), pick AS (
  SELECT a.id, a.priority, a.run_at, a.scope, a.slot, a.walk, a.rscope, a.rslot, a.win, a.rule, a.queue, a.job_group FROM (
    SELECT a.*, row_number() OVER (PARTITION BY a.queue, a.job_group ORDER BY a.priority DESC, a.run_at, a.id) AS in_group
    FROM admitted a
  ) a
  LEFT JOIN grp w ON w.queue = a.queue AND w.job_group = a.job_group
  ORDER BY a.priority DESC, ceil(a.in_group::numeric / coalesce(w.weight, 1)), a.run_at, a.id
  LIMIT ${limit}
), started AS (
  -- The rate slots of the picked jobs, in key order (two claims meeting on slots wait in one
  -- order: no deadlock). A slot another claim took since this one's snapshot fails the WHERE on
  -- its latest version: no row, and its job is not leased.
  INSERT INTO __q_schema__.q_job_rate_slots AS s (scope, slot, started_at, window_ms)
  SELECT p.rscope, p.rslot, now(), p.win FROM pick p WHERE p.rscope IS NOT NULL ORDER BY p.rscope, p.rslot
  ON CONFLICT (scope, slot) DO UPDATE SET started_at = EXCLUDED.started_at, window_ms = EXCLUDED.window_ms
    WHERE s.started_at < now() - s.window_ms * interval '1 millisecond'
  RETURNING s.scope, s.slot
), refused AS (
  -- Per rule and kind, the groups this claim found at a limit, one each: those it did not read
  -- (no room under the queue's rule), those whose candidates it left queued (a scope another
  -- claim was admitting just then is not one of them), and those whose rate slot was lost.
  SELECT x.rule, x.kind, count(DISTINCT x.grp) AS n FROM (
    SELECT qr.i AS rule, CASE WHEN g.cap IS NOT NULL AND g.cap <= cardinality(g.used) THEN 'c' ELSE 'r' END AS kind,
           g.queue || chr(10) || g.job_group AS grp
    FROM grp g JOIN qrule qr ON qr.queue = g.queue
    WHERE g.room = 0 AND (g.scope IS NOT NULL OR g.rscope IS NOT NULL)
    UNION ALL
    SELECT k.rule, CASE WHEN k.scope IN (SELECT admitting.scope FROM admitting) AND f.slot IS NULL THEN 'c' ELSE 'r' END,
           k.queue || chr(10) || k.job_group
    FROM ranked k
    LEFT JOIN free f ON f.scope = k.scope AND f.nth = k.in_scope
    LEFT JOIN rfree rf ON rf.rscope = k.rscope AND rf.nth = k.in_rscope
    WHERE (k.scope IN (SELECT admitting.scope FROM admitting) AND f.slot IS NULL)
       OR (k.rscope IN (SELECT radmitting.rscope FROM radmitting) AND rf.slot IS NULL)
    UNION ALL
    SELECT p.rule, 'r', p.queue || chr(10) || p.job_group FROM pick p
    WHERE p.rscope IS NOT NULL AND NOT EXISTS (SELECT 1 FROM started WHERE started.scope = p.rscope AND started.slot = p.rslot)
  ) x GROUP BY x.rule, x.kind
), placed AS MATERIALIZED (
  -- The picked jobs that may be leased (their rate slot taken, if any) as aligned arrays: the
  -- UPDATE finds a row's slot and walk by its position, where a lookup in pick per row would
  -- read all of pick for each (quadratic in the claim's size).
  SELECT array_agg(p.id) AS ids, array_agg(p.scope) AS scopes, array_agg(p.slot) AS slots, array_agg(p.walk) AS walks
  FROM pick p
  WHERE p.rscope IS NULL OR EXISTS (SELECT 1 FROM started WHERE started.scope = p.rscope AND started.slot = p.rslot)
)`;
}

/** The UPDATE that leases the picked jobs as the plain claim does, each with the slot it took. */
function groupedClaimUpdate(p: GroupedParams): string {
  return `
UPDATE __q_schema__.q_jobs AS jobs SET status = ${p.status}::__q_schema__.q_job_status, leased_by = ${p.workerId}, lease_token = md5(${p.claimId}::text || jobs.id::text)::uuid,
       lease_expires_at = now() + ${p.leaseMs} * interval '1 millisecond', heartbeat_at = now(),
       attempt = jobs.attempt + 1, updated_at = now(), job_key = NULL,
       limit_scope = (SELECT l.scopes FROM placed l)[array_position((SELECT l.ids FROM placed l), jobs.id)],
       limit_slot = (SELECT l.slots FROM placed l)[array_position((SELECT l.ids FROM placed l), jobs.id)]
WHERE jobs.id = ANY((SELECT l.ids FROM placed l)::int8[])
RETURNING ${claimReturning()}, ((SELECT l.walks FROM placed l)[array_position((SELECT l.ids FROM placed l), jobs.id)])::text`;
}

/** What a grouped claim adds to a plain one: where each queue's walk starts, the limits, the weights. */
export interface ClaimGroupsInput {
  /** Per queue, aligned with `queues`: the group the previous walk of the queue ended at, or null. */
  cursors: (string | null)[];
  /**
   * The limit rules in order (the first matching a job applies): queue and type (null: any), id,
   * concurrency and rate (starts per `windowMs`; null: none).
   */
  rules: {
    queue: (string | null)[];
    type: (string | null)[];
    id: string[];
    cap: (number | null)[];
    rate: (number | null)[];
    windowMs: (number | null)[];
  };
  /** Per-group concurrency under a rule (1-based index into `rules`), where it differs from the rule's. */
  caps: { rule: number[]; group: string[]; cap: number[] };
  /** Round-robin weights of groups (absent: 1). */
  weights: { group: string[]; weight: number[] };
}

/** What a grouped claim asks for: a plain claim's queues, limit and lease (no start positions: it reads every queue from its head). */
export type GroupedClaimInput = Omit<ClaimInput, 'starts'>;

/** A grouped claim's parameters in statement order (see {@link groupedParams}). */
export function groupedClaimValues(c: GroupedClaimInput, g: ClaimGroupsInput): unknown[] {
  return [
    c.queues,
    c.limit,
    c.workerId,
    c.leaseMs,
    c.status,
    c.claimId,
    g.cursors,
    g.rules.queue,
    g.rules.type,
    g.rules.id,
    g.rules.cap,
    g.rules.rate,
    g.rules.windowMs,
    g.caps.rule,
    g.caps.group,
    g.caps.cap,
    g.weights.group,
    g.weights.weight,
  ];
}

/** A grouped claim's placeholders from `$first` on, and its CTEs and UPDATE (for complete-and-claim). */
export function groupedClaimText(first: number): { ctes: string; update: string } {
  const p = groupedParams(first);
  return { ctes: groupedClaimCtes(p), update: groupedClaimUpdate(p) };
}

/**
 * The refusals of a grouped claim as one text, `<rule>:<c|r>:<count>` joined by `,` (NULL: none):
 * the last column of its report row (see {@link takeRefusals}).
 */
export const REFUSALS = `(SELECT string_agg(refused.rule || ':' || refused.kind || ':' || refused.n, ',') FROM refused)`;

// Alone, a grouped claim returns the leased rows and then one report row (job columns NULL) whose
// last column lists the refusals.
const G = groupedClaimText(1);
const NULLS = Array.from({ length: JOB_COLUMN_COUNT + 2 }, () => 'NULL').join(', ');
const TEXT_STMT = statement(
  'q_jobs_claim_grouped',
  `WITH ${G.ctes}, claimed AS (${G.update}
)
SELECT claimed.*, NULL::text AS refused FROM claimed
UNION ALL
SELECT ${NULLS}, ${REFUSALS}`,
  { types: repeatedTimestamps, rowMode: 'array' },
);

/** Adds a report row's refusals text (see {@link REFUSALS}) to `out`. */
export function takeRefusals(text: unknown, out: ClaimedRows): void {
  if (typeof text !== 'string') return;
  for (const part of text.split(',')) {
    const [rule, kind, n] = part.split(':');
    (out.refusals ??= []).push({ rule: Number(rule), kind: kind === 'c' ? 'concurrency' : 'rate', count: Number(n) });
  }
}

/**
 * Maps one row of a grouped claim (job columns from `at`, the lease token, the walk number of the
 * job's group) into `out`; per queue, the group furthest along the walk becomes the cursor.
 */
export function takeGroupedRow(v: readonly unknown[], at: number, claim: ClaimedAs, out: ClaimedRows, walks: Map<string, number>): void {
  const job: LeasedJob = leasedJobOf(v, at, claim);
  out.jobs.push(job);
  const walk = v[at + JOB_COLUMN_COUNT + 1];
  if (typeof walk !== 'string' || job.group === null) return;
  const n = Number(walk);
  if (n > (walks.get(job.queue) ?? 0)) {
    walks.set(job.queue, n);
    (out.cursors ??= new Map()).set(job.queue, job.group);
  }
}

/**
 * Leases up to `limit` jobs of `queues`, interleaving groups and holding the concurrency limits of
 * `groups` (see above); each queue is read from its head.
 */
export async function claimGroupedJobs(
  scope: StatementScope,
  db: Queryable,
  claim: GroupedClaimInput,
  groups: ClaimGroupsInput,
): Promise<ClaimedRows> {
  const { rows } = await scope.run<unknown[]>(db, TEXT_STMT, groupedClaimValues(claim, groups));
  const out: ClaimedRows = { jobs: [], end: undefined };
  const walks = new Map<string, number>();
  for (const v of rows) {
    if (v[0] === null) takeRefusals(v[JOB_COLUMN_COUNT + 2], out);
    else takeGroupedRow(v, 0, claim, out, walks);
  }
  return out;
}
