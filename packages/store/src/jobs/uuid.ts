import { randomUUID } from 'node:crypto';

/**
 * The uuid q stores for job `id` (migration 0007, the SQL function q_job_uuid, which this
 * matches): the id in the first 60 bits, the version 8, then the last 62 bits of `random` with its
 * variant. A live job is found by the id its uuid carries (the hot table has no uuid index), the
 * uuids sort as the ids do, and 62 random bits keep a uuid from being derived from an id. Every
 * id a JavaScript number holds exactly fits in 60 bits.
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

/**
 * A time-ordered UUID (version 7, RFC 9562): 48 bits of Unix milliseconds, then random bits. The
 * random source of each job's uuid ({@link jobUuid}); the stored uuid is this one when its id does
 * not fit the layout (never for a JavaScript number).
 *
 * Why not version 4: every job row is indexed by its uuid, and the index is written again
 * whenever the row gets a new version (each claim and completion). Random keys spread those writes
 * over the whole index, so with a large history nearly every write lands on a page of its own,
 * often one not touched since the last checkpoint, which costs a full-page image in the WAL. Keys
 * that grow with time keep the writes of a drain on the few pages at the right edge.
 *
 * The random part comes from `randomUUID` (its 74 random bits after the version and variant),
 * whose entropy Node pools; the uuid stays unguessable, and collisions need two of 2^74 in one
 * millisecond.
 */
export function uuidV7(now: number = Date.now()): string {
  // A batch draws many uuids in one millisecond: its time part is formatted once.
  if (now !== prefixMs) {
    const ts = now.toString(16).padStart(12, '0');
    prefix = `${ts.slice(0, 8)}-${ts.slice(8, 12)}-7`;
    prefixMs = now;
  }
  // randomUUID(): xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx; the variant nibble V is already RFC 9562's.
  return prefix + randomUUID().slice(15);
}

let prefixMs = Number.NaN;
let prefix = '';
