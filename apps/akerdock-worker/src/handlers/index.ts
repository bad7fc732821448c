import type { HandlerFunc } from '../job-types.js';
import type { Logger } from '../logger.js';
import { notifySend } from './notify.js';
import { maintenancePurge, type PurgeTargets } from './purge.js';
import { webhookDeliver } from './webhook.js';

export { GiveUpError } from './give-up.js';
export { classifyStatus, signedPost, type DeliveryVerdict, type PostOutcome } from './http-post.js';
export { notifySend, parseNotifyPayload, type NotifyOptions, type NotifyPayload } from './notify.js';
export { maintenancePurge, PURGE_LOCK_KEY, type PurgeLock, type PurgeOptions, type PurgeResult, type PurgeTargets } from './purge.js';
export { parseWebhookPayload, webhookDeliver, type WebhookOptions, type WebhookPayload, type WebhookResult } from './webhook.js';

/** Job type → handler. The worker registers every entry; add your own with one line. */
export type HandlerMap = Record<string, HandlerFunc>;

/** What the built-in handlers need from the process. */
export interface BuiltinHandlerDeps {
  logger: Logger;
  webhookSecret: string | undefined;
  webhookTimeoutMs: number;
  notifyUrl: string | undefined;
  purgeAfterMs: number;
  purge: PurgeTargets;
}

/**
 * The reference handlers: `webhook.deliver`, `notify.send`, `maintenance.purge`. Extend with
 * `{ ...builtinHandlers(deps), 'report.build': myHandler }`.
 */
export function builtinHandlers(deps: BuiltinHandlerDeps): HandlerMap {
  return {
    'webhook.deliver': webhookDeliver({ secret: deps.webhookSecret, timeoutMs: deps.webhookTimeoutMs }),
    'notify.send': notifySend({ url: deps.notifyUrl, secret: deps.webhookSecret, timeoutMs: deps.webhookTimeoutMs, logger: deps.logger }),
    'maintenance.purge': maintenancePurge(deps.purge, { purgeAfterMs: deps.purgeAfterMs }),
  };
}
