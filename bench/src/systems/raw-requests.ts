import { benchPool } from '../pg.js';
import { check } from '../verify.js';
import { PAYLOAD, QUEUE, ROUTE, idOf, indexOf, type RequestHarness, type RequestSystem } from './requests.js';

/**
 * The raw-SQL limit of the request queue: the same columns as `q_requests`, no partitions,
 * no leases, no fencing. A dispatcher claims up to `batch` pending rows (earliest deadline, then
 * submission order, `FOR UPDATE SKIP LOCKED`) stamping a fresh attempt, and acks by deleting them
 * and writing their results in one statement.
 */
const SCHEMA = `
CREATE SEQUENCE raw_attempts;
CREATE TABLE raw_requests (
  id text NOT NULL, request_token text NOT NULL, queue text NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  deadline bigint NOT NULL, attempt bigint NOT NULL DEFAULT 0,
  envelope text NOT NULL, payload bytea NOT NULL,
  PRIMARY KEY (id, request_token)
);
CREATE INDEX raw_requests_pending ON raw_requests (queue, deadline, seq) WHERE attempt = 0;
CREATE TABLE raw_results (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  route text NOT NULL, id text NOT NULL, request_token text NOT NULL, payload text NOT NULL
);
CREATE INDEX raw_results_route_seq ON raw_results (route, seq);
`;

const enqueue = {
  name: 'raw_requests_enqueue',
  text: `INSERT INTO raw_requests (id, request_token, queue, deadline, envelope, payload)
         SELECT id, tok, $3, dl, env, pl
         FROM unnest($1::text[], $2::text[], $4::bigint[], $5::text[], $6::bytea[]) AS t(id, tok, dl, env, pl)`,
};
const claim = {
  name: 'raw_requests_claim',
  text: `UPDATE raw_requests AS r SET attempt = nextval('raw_attempts')
         FROM (SELECT id, request_token FROM raw_requests
               WHERE queue = $1 AND attempt = 0
               ORDER BY deadline, seq LIMIT $2 FOR UPDATE SKIP LOCKED) AS c
         WHERE r.id = c.id AND r.request_token = c.request_token
         RETURNING r.id, r.request_token, r.attempt, r.envelope, r.payload`,
};
const ack = {
  name: 'raw_requests_ack',
  text: `WITH done AS (
           DELETE FROM raw_requests AS r USING unnest($1::text[], $2::text[], $3::bigint[]) AS k(id, tok, att)
           WHERE r.id = k.id AND r.request_token = k.tok AND r.attempt = k.att
           RETURNING r.id, r.request_token)
         INSERT INTO raw_results (route, id, request_token, payload) SELECT $4, id, request_token, '' FROM done`,
};

export const rawSqlRequests: RequestSystem = {
  name: 'raw-sql',
  async open(dsn, poolSize): Promise<RequestHarness> {
    const pool = benchPool(dsn, poolSize, 'raw-sql requests');
    try {
      await pool.query(SCHEMA);
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    const deadline = Math.floor(Date.now() / 1000) + 3600;
    const count = async (sql: string) => Number((await pool.query<{ n: string }>(sql)).rows[0]?.n ?? 0);
    return {
      async enqueue(from, n) {
        const ids = Array.from({ length: n }, (_, k) => idOf(from + k));
        await pool.query({
          ...enqueue,
          values: [ids, ids.map(() => 't'), QUEUE, ids.map(() => deadline), ids.map(() => '{}'), ids.map(() => PAYLOAD)],
        });
      },
      stored: () => count('SELECT count(*) AS n FROM raw_requests'),
      results: () => count('SELECT count(*) AS n FROM raw_results'),
      async drain({ runners, batch, onHandled }) {
        const loop = async () => {
          for (;;) {
            const r = await pool.query<{ id: string; request_token: string; attempt: string }>({ ...claim, values: [QUEUE, batch] });
            if (r.rows.length === 0) return;
            for (const row of r.rows) onHandled(indexOf(row.id));
            const w = await pool.query({
              ...ack,
              values: [r.rows.map((x) => x.id), r.rows.map((x) => x.request_token), r.rows.map((x) => x.attempt), ROUTE],
            });
            check(w.rowCount === r.rows.length, `raw-sql: ${w.rowCount} of ${r.rows.length} acks written`);
          }
        };
        await Promise.all(Array.from({ length: runners }, loop));
      },
      close: () => pool.end(),
    };
  },
};
