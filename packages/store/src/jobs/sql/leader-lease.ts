import type { Queryable } from '@q/schema';
import { statement, type StatementScope } from '@q/schema/internal';

// A leadership is one row of q_leader_leases, timed by the database clock. Taking it over bumps
// the epoch; the holder renews it (same owner and epoch, not yet expired) and a release expires
// it in place, so the epoch never goes back and a deposed holder's fenced writes keep failing.
// Durations travel as milliseconds ($3) and become intervals on the server.

// The update reads the clock itself, not the proposed row's times: those were taken before the
// bid waited for the row lock of a holder mid-round (up to a second, or the idle timeout of a
// stopped one), and a lease timed from then would start shortened, or already expired.
const ACQUIRE = statement(
  'q_jobs_leader_acquire',
  `INSERT INTO __q_schema__.q_leader_leases AS l (name, owner, epoch, expires_at, acquired_at, renewed_at)
VALUES ($1, $2, 1, clock_timestamp() + $3::int * interval '1 millisecond', clock_timestamp(), clock_timestamp())
ON CONFLICT (name) DO UPDATE SET
  owner = EXCLUDED.owner,
  epoch = CASE WHEN l.owner = EXCLUDED.owner THEN l.epoch ELSE l.epoch + 1 END,
  expires_at = clock_timestamp() + $3::int * interval '1 millisecond',
  acquired_at = CASE WHEN l.owner = EXCLUDED.owner THEN l.acquired_at ELSE clock_timestamp() END,
  renewed_at = clock_timestamp()
WHERE l.owner = EXCLUDED.owner OR l.expires_at <= clock_timestamp()
RETURNING epoch::text AS epoch, expires_at`,
);

// Also what fences a maintenance round: run first in its transaction, it locks the row, so a
// takeover waits for that transaction to end (or for the server to end an idle holder's session).
const RENEW = statement(
  'q_jobs_leader_renew',
  `UPDATE __q_schema__.q_leader_leases
SET expires_at = clock_timestamp() + $4::int * interval '1 millisecond', renewed_at = clock_timestamp()
WHERE name = $1 AND owner = $2 AND epoch = $3::bigint AND expires_at > clock_timestamp()
RETURNING epoch::text AS epoch, expires_at`,
);

const RELEASE = statement(
  'q_jobs_leader_release',
  `UPDATE __q_schema__.q_leader_leases SET expires_at = clock_timestamp()
WHERE name = $1 AND owner = $2 AND epoch = $3::bigint AND expires_at > clock_timestamp()
RETURNING epoch`,
);

/** A row of `q_leader_leases` as held by one owner. */
export interface LeaseRow {
  epoch: string;
  expires_at: Date;
}

/** Takes `name` for `owner` for `ttlMs` if it is free, expired or already `owner`'s; null otherwise. */
export async function acquireLeaderLease(
  scope: StatementScope,
  db: Queryable,
  name: string,
  owner: string,
  ttlMs: number,
): Promise<LeaseRow | null> {
  const { rows } = await scope.run<LeaseRow>(db, ACQUIRE, [name, owner, ttlMs]);
  return rows[0] ?? null;
}

/** Extends the lease held as (`owner`, `epoch`) by `ttlMs` from now; null when it expired or was taken over. */
export async function renewLeaderLease(
  scope: StatementScope,
  db: Queryable,
  name: string,
  owner: string,
  epoch: number,
  ttlMs: number,
): Promise<LeaseRow | null> {
  const { rows } = await scope.run<LeaseRow>(db, RENEW, [name, owner, epoch, ttlMs]);
  return rows[0] ?? null;
}

/** Expires the lease held as (`owner`, `epoch`) now; false when it was no longer held. */
export async function releaseLeaderLease(scope: StatementScope, db: Queryable, name: string, owner: string, epoch: number): Promise<boolean> {
  const { rowCount } = await scope.run(db, RELEASE, [name, owner, epoch]);
  return rowCount === 1;
}
