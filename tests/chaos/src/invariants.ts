import pg from 'pg';

/** Violations of the request-queue promises, read from the database alone. */
export async function requestQueueViolations(dsn: string, ids: string[]): Promise<string[]> {
  const c = new pg.Client({ connectionString: dsn });
  await c.connect();
  try {
    const problems: string[] = [];
    const left = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM async_requests WHERE queue = 'chaos'`);
    if (left.rows[0]!.n !== 0) problems.push(`${left.rows[0]!.n} requests never got a result`);
    const counts = await c.query<{ id: string; n: number }>(
      `SELECT r.id, count(res.seq)::int AS n FROM unnest($1::text[]) AS r(id)
         LEFT JOIN async_results res ON res.id = r.id GROUP BY r.id HAVING count(res.seq) <> 1`,
      [ids],
    );
    for (const row of counts.rows.slice(0, 10)) problems.push(`request ${row.id} has ${row.n} results`);
    if (counts.rows.length > 10) problems.push(`… and ${counts.rows.length - 10} more requests without exactly one result`);
    // An epoch belongs to one acquisition by one owner: two owners' results under one
    // (partition, epoch) would mean a fenced owner's ack was accepted.
    const shared = await c.query<{ partition: number; epoch: number; owners: string[] }>(
      `SELECT (payload::json->>'partition')::int AS partition, (payload::json->>'epoch')::bigint AS epoch,
              array_agg(DISTINCT payload::json->>'owner') AS owners
         FROM async_results WHERE route = 'chaos-results'
        GROUP BY 1, 2 HAVING count(DISTINCT payload::json->>'owner') > 1`,
    );
    for (const row of shared.rows) problems.push(`partition ${row.partition} epoch ${row.epoch} acked by ${row.owners.join(', ')}`);
    return problems;
  } finally {
    await c.end();
  }
}
