import { invalidArgument } from '@q/schema';

/** The opaque list cursor: base64url (no padding) of `v1:<last id>`. */
export function encodeCursor(lastId: number): string {
  return Buffer.from(`v1:${lastId}`, 'utf8').toString('base64url');
}

/** Decodes a cursor from {@link encodeCursor}; anything else is `INVALID_ARGUMENT` "invalid cursor". */
export function decodeCursor(cursor: string): number {
  if (typeof cursor !== 'string' || !/^[A-Za-z0-9_-]{1,40}$/.test(cursor)) throw invalidArgument('invalid cursor');
  const m = /^v1:([1-9][0-9]{0,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  const id = m ? Number(m[1]) : NaN;
  if (!Number.isSafeInteger(id)) throw invalidArgument('invalid cursor');
  return id;
}
