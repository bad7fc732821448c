// Bearer API keys of the Batch API: the configuration holds only their SHA-256, so neither the
// config file nor a log line ever shows a key; a request's key is hashed and looked up.
import { createHash } from 'node:crypto';
import type { ApiKeyConfig } from '../config/schema.js';

/** The lower-case hex SHA-256 of `key`, as `batch_api.api_keys[].sha256` holds it. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** The tenants of the configured keys, by key hash. */
export class ApiKeys {
  readonly #tenants: Map<string, string>;

  constructor(keys: readonly ApiKeyConfig[]) {
    this.#tenants = new Map(keys.map((k) => [k.sha256, k.tenant]));
  }

  /** The tenant of an `Authorization: Bearer <key>` header, or `undefined` (missing, malformed or unknown key). */
  tenantOf(authorization: string | undefined): string | undefined {
    const m = /^Bearer ([^\s]+)$/i.exec(authorization ?? '');
    if (!m) return undefined;
    return this.#tenants.get(hashApiKey(m[1] as string));
  }
}
