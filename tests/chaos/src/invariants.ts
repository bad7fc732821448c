import pg from 'pg';

/** Violations of the request-queue promises, read from the database alone. */
export async function requestQueueViolations(dsn: string, ids: string[]): Promise<string[]> {
  const c = new pg.Client({ connectionString: dsn });
  c.on('error', () => undefined); // checked right after fault scenarios: a late termination must not crash
  await c.connect();
  try {
    const problems: string[] = [];
    const left = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM q_requests WHERE queue = 'chaos'`);
    const unanswered = left.rows[0]?.n ?? 0; // count(*) always returns one row
    if (unanswered !== 0) problems.push(`${unanswered} requests never got a result`);
    const counts = await c.query<{ id: string; n: number }>(
      `SELECT r.id, count(res.seq)::int AS n FROM unnest($1::text[]) AS r(id)
         LEFT JOIN q_results res ON res.id = r.id GROUP BY r.id HAVING count(res.seq) <> 1`,
      [ids],
    );
    for (const row of counts.rows.slice(0, 10)) problems.push(`request ${row.id} has ${row.n} results`);
    if (counts.rows.length > 10) problems.push(`… and ${counts.rows.length - 10} more requests without exactly one result`);
    // An epoch belongs to one acquisition by one owner: two owners' results under one
    // (partition, epoch) would mean a fenced owner's ack was accepted.
    const shared = await c.query<{ partition: number; epoch: number; owners: string[] }>(
      `SELECT (payload::json->>'partition')::int AS partition, (payload::json->>'epoch')::bigint AS epoch,
              array_agg(DISTINCT payload::json->>'owner') AS owners
         FROM q_results WHERE route = 'chaos-results'
        GROUP BY 1, 2 HAVING count(DISTINCT payload::json->>'owner') > 1`,
    );
    for (const row of shared.rows) problems.push(`partition ${row.partition} epoch ${row.epoch} acked by ${row.owners.join(', ')}`);
    return problems;
  } finally {
    await c.end();
  }
}

/** Violations of the job-queue promises, read from the database alone. */
export async function jobQueueViolations(dsn: string, killedPids: Set<number>): Promise<{ problems: string[]; counts: Record<string, number> }> {
  const c = new pg.Client({ connectionString: dsn });
  c.on('error', () => undefined); // checked right after fault scenarios: a late termination must not crash
  await c.connect();
  try {
    const problems: string[] = [];
    const byStatus = await c.query<{ status: string; n: number }>(`SELECT status::text, count(*)::int AS n FROM q_jobs_all GROUP BY 1`);
    const counts = Object.fromEntries(byStatus.rows.map((r) => [r.status, r.n]));
    for (const [status, n] of Object.entries(counts)) {
      if (status !== 'succeeded' && status !== 'dead_letter') problems.push(`${n} jobs ended ${status}`);
    }
    // Finished jobs live in the archive only, and each job in one table: a move (delete from the
    // hot table, insert into the archive) is one transaction, so a kill leaves it undone or done.
    const misplaced = await c.query<{ hot: number; both: number }>(
      `SELECT (SELECT count(*) FROM q_jobs WHERE status IN ('succeeded', 'cancelled', 'dead_letter'))::int AS hot,
              (SELECT count(*) FROM q_jobs j JOIN q_jobs_archive a ON a.id = j.id)::int AS both`,
    );
    const m = misplaced.rows[0];
    if (m && m.hot > 0) problems.push(`${m.hot} finished jobs left in the hot table`);
    if (m && m.both > 0) problems.push(`${m.both} jobs in both the hot table and the archive`);
    // A success is recorded for an execution that really ran.
    const orphan = await c.query<{ id: number }>(
      `SELECT j.id FROM q_jobs_all j WHERE j.status = 'succeeded' AND NOT EXISTS (
         SELECT 1 FROM chaos_effects e WHERE e.job_id = j.id AND e.pid = (j.result->>'pid')::int AND e.attempt = (j.result->>'attempt')::int)`,
    );
    for (const r of orphan.rows.slice(0, 5)) problems.push(`job ${r.id} succeeded with a result no execution produced`);
    // Executions after the recorded success by processes that were never killed would mean a
    // second success was possible: a job only runs again when its runner died mid-attempt.
    const twice = await c.query<{ id: number; pids: number[] }>(
      `SELECT j.id, array_agg(e.pid) AS pids FROM q_jobs_all j JOIN chaos_effects e ON e.job_id = j.id
        WHERE j.status = 'succeeded' AND e.attempt > (j.result->>'attempt')::int GROUP BY j.id`,
    );
    for (const r of twice.rows) {
      const survivors = r.pids.filter((p) => !killedPids.has(p));
      if (survivors.length > 0) problems.push(`job ${r.id} ran again after its success (pids ${survivors.join(', ')})`);
    }
    return { problems, counts };
  } finally {
    await c.end();
  }
}
