import { customType } from 'drizzle-orm/pg-core';

/** `bytea` mapped to `Uint8Array`/`Buffer`: payloads round-trip byte-exact. */
export const bytea = customType<{ data: Uint8Array; driverData: Buffer }>({
  dataType() {
    return 'bytea';
  },
  toDriver(value) {
    return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  },
});
