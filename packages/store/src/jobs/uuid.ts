/**
 * The uuid q stores for job `id` (migration 0007, the SQL function q_job_uuid, which this
 * matches): the id in the first 60 bits, the version 8, then the last 62 bits of `random` with its
 * variant. A live job is found by the id its uuid carries (the hot table has no uuid index), the
 * uuids sort as the ids do, and 62 random bits keep a uuid from being derived from an id. Every
 * id a JavaScript number holds exactly fits in 60 bits. `random` is a version-4 uuid
 * (`randomUUID`), drawn per job before the statement that inserts it; the SQL function stores it
 * unchanged only for an id too large for the layout (never one a JavaScript number holds).
 */
export function jobUuid(id: number, random: string): string {
  // The id's bits above its low 12 (under 2^41 for any safe integer), then its low 12 after the version.
  const high = Math.floor(id / 4096)
    .toString(16)
    .padStart(12, '0');
  return high.slice(0, 8) + '-' + high.slice(8) + '-8' + (id % 4096).toString(16).padStart(3, '0') + random.substring(18);
}

/**
 * The part of a stored job uuid that comes from the random uuid it was made from ({@link jobUuid}):
 * the same in both, so it matches the rows a statement returns to its inputs.
 */
export function uuidTail(uuid: string): string {
  return uuid.slice(19);
}
