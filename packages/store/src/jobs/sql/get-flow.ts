import { statement, type StatementScope } from '@q/schema/internal';
import { jobColumns } from '../row.js';
import type { Queryable } from './db.js';
import type { FlowNodeRow } from './insert-flow.js';

/** A flow's own row. */
export interface FlowRow {
  id: string;
  name: string | null;
  idempotency_key: string | null;
  created_at: Date;
}

/** An edge of a flow: the parent and child job ids and the child's failure policy. */
export interface FlowEdgeRow {
  parent_id: string;
  child_id: string;
  on_failure: string;
}

// A flow by its id or by its idempotency key, then its nodes (live and archived, each table by
// its partial index on flow_id) and its edges (by the parents' ids: the edges' primary key).
const FLOW = `SELECT id, name, idempotency_key, created_at FROM __q_schema__.q_flows
WHERE id = $1::uuid OR ($1::uuid IS NULL AND idempotency_key = $2::text)`;
const NODES = `SELECT ${jobColumns('j')}, j.flow_ref FROM __q_schema__.q_jobs j WHERE j.flow_id = $1::uuid
UNION ALL
SELECT ${jobColumns('a')}, a.flow_ref FROM __q_schema__.q_jobs_archive a WHERE a.flow_id = $1::uuid
ORDER BY id`;
const EDGES = `SELECT e.parent_id, e.child_id, e.on_failure FROM __q_schema__.q_job_edges e
WHERE e.parent_id = ANY(ARRAY(SELECT id FROM __q_schema__.q_jobs WHERE flow_id = $1::uuid
                              UNION ALL SELECT id FROM __q_schema__.q_jobs_archive WHERE flow_id = $1::uuid))
ORDER BY e.parent_id, e.child_id`;

const FLOW_STMT = statement('q_jobs_get_flow', FLOW);
const NODES_STMT = statement('q_jobs_get_flow_nodes', NODES);
const EDGES_STMT = statement('q_jobs_get_flow_edges', EDGES);

/** The flow with this id (or, id null, this idempotency key), or `undefined`. */
export async function getFlowRow(scope: StatementScope, db: Queryable, id: string | null, key: string | null): Promise<FlowRow | undefined> {
  const { rows } = await scope.run<FlowRow>(db, FLOW_STMT, [id, key]);
  return rows[0];
}

/** The jobs of the flow's nodes, in id order (parents before their children, see insert-flow.ts). */
export async function getFlowNodes(scope: StatementScope, db: Queryable, flowId: string): Promise<FlowNodeRow[]> {
  const { rows } = await scope.run<FlowNodeRow>(db, NODES_STMT, [flowId]);
  return rows;
}

/** The flow's edges. */
export async function getFlowEdges(scope: StatementScope, db: Queryable, flowId: string): Promise<FlowEdgeRow[]> {
  const { rows } = await scope.run<FlowEdgeRow>(db, EDGES_STMT, [flowId]);
  return rows;
}
