import { randomUUID } from 'node:crypto';

/**
 * A time-ordered UUID (version 7, RFC 9562): 48 bits of Unix milliseconds, then random bits.
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
