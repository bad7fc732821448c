// Reads plans through auto_explain (EXPLAIN ANALYZE of every statement, nested ones included:
// the statements inside the planner-proof SQL functions too), delivered to the client as notices.
import type pg from 'pg';

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Function Name'?: string;
  Alias?: string;
  /** With `buffers`: pages this node (and the nodes under it) found in shared buffers / read. */
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/**
 * Turns on auto_explain (ANALYZE, JSON, nested statements) on `client` and collects the plans;
 * with `buffers`, each node also carries its buffer counts.
 */
export async function capturePlans(client: pg.PoolClient, opts: { buffers?: boolean } = {}): Promise<{ take(): PlanNode[]; stop(): void }> {
  let plans: PlanNode[] = [];
  const onNotice = (msg: { message?: string }): void => {
    const text = msg.message ?? '';
    const at = text.indexOf('{');
    if (!text.includes('plan:') || at < 0) return;
    const parsed = JSON.parse(text.slice(at)) as { Plan: PlanNode };
    plans.push(parsed.Plan);
  };
  client.on('notice', onNotice);
  for (const s of [
    `LOAD 'auto_explain'`,
    'SET auto_explain.log_min_duration = 0',
    'SET auto_explain.log_analyze = on',
    'SET auto_explain.log_timing = off',
    'SET auto_explain.log_nested_statements = on',
    `SET auto_explain.log_format = 'json'`,
    `SET auto_explain.log_level = 'notice'`,
    `SET client_min_messages = 'notice'`,
    `SET auto_explain.log_buffers = ${opts.buffers === true ? 'on' : 'off'}`,
  ])
    await client.query(s);
  return {
    take() {
      const out = plans;
      plans = [];
      return out;
    },
    stop() {
      client.off('notice', onNotice);
    },
  };
}

/**
 * Runs `fn` with auto_explain on the only connection of `pool` (a pool of one, so `fn`'s
 * statements run on it) and returns the plans they produced; auto_explain is off again after.
 */
export async function plansOf(pool: pg.Pool, fn: () => Promise<unknown>, opts: { buffers?: boolean } = {}): Promise<PlanNode[]> {
  const client = await pool.connect();
  let plans: { take(): PlanNode[]; stop(): void };
  try {
    plans = await capturePlans(client, opts);
  } finally {
    client.release();
  }
  await fn();
  const got = plans.take();
  plans.stop();
  const off = await pool.connect();
  try {
    await off.query('SET auto_explain.log_min_duration = -1');
  } finally {
    off.release();
  }
  return got;
}

/** Calls `visit` on `node` and every node under it. */
export function walk(node: PlanNode, visit: (n: PlanNode) => void): void {
  visit(node);
  for (const child of node.Plans ?? []) walk(child, visit);
}

const SCANS = new Set(['Seq Scan', 'Index Scan', 'Index Only Scan', 'Bitmap Heap Scan', 'Tid Scan', 'Tid Range Scan', 'Sample Scan']);

/** The leading column of every index of `tables`. */
export async function leadingColumns(db: pg.Pool, tables: string[]): Promise<Map<string, string>> {
  const { rows } = await db.query<{ index: string; col: string }>(
    `SELECT c.relname AS index, a.attname AS col
       FROM pg_index i
       JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
      WHERE i.indrelid = ANY (SELECT t::regclass FROM unnest($1::text[]) AS t)`,
    [tables],
  );
  return new Map(rows.map((r) => [r.index, r.col]));
}

/**
 * Rows of `tables` that scan nodes of `plans` read (returned or filtered out), over all loops.
 * `unkeyed` lists index scans whose condition does not pin the index's leading column: those
 * walk the whole index, whatever their row counts say.
 */
export function rowsRead(
  plans: PlanNode[],
  tables: string[],
  leading: Map<string, string>,
): { rows: number; seqScans: number; unkeyed: string[]; scans: string[] } {
  let rows = 0;
  let seqScans = 0;
  const unkeyed: string[] = [];
  const scans: string[] = [];
  for (const plan of plans) {
    walk(plan, (n) => {
      if (!SCANS.has(n['Node Type']) || !n['Relation Name'] || !tables.includes(n['Relation Name'])) return;
      const loops = n['Actual Loops'] ?? 1;
      const read = (n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0);
      rows += Math.round(read * loops);
      if (n['Node Type'] === 'Seq Scan') seqScans++;
      const index = n['Index Name'];
      if (index) {
        const col = leading.get(index);
        const cond = n['Index Cond'] ?? '';
        if (!col || !new RegExp(`(^|[\\s(.])${col} = `).test(cond)) unkeyed.push(`${index}: ${cond || 'no condition'}`);
      }
      scans.push(`${n['Node Type']} ${n['Index Name'] ?? n['Relation Name']} ×${loops}`);
    });
  }
  return { rows, seqScans, unkeyed, scans };
}
