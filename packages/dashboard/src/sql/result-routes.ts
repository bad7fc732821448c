import { statement } from '@q/schema/internal';

// Result rows per route, read through q_results_route_seq (route, seq).
/** Results waiting to be popped, per route. */
export const RESULT_ROUTES = statement(
  'q_dashboard_result_routes',
  `SELECT route, count(*)::int8 AS depth FROM __q_schema__.q_results GROUP BY route ORDER BY route`,
);
