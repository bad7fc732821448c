// The Batch API's objects as OpenAI's clients read them: the file object, the batch object
// (with q's extra `usage` and `tenant`-free fields; clients ignore unknown fields) and lists.
import type { Batch, BatchFile, Page } from '@q/store';

/** The file object. */
export function fileJson(f: BatchFile): Record<string, unknown> {
  return {
    id: f.id,
    object: 'file',
    bytes: f.bytes,
    created_at: f.createdAt,
    expires_at: f.expiresAt === 0 ? null : f.expiresAt,
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed',
    status_details: null,
  };
}

const FINISHED = new Set(['completed', 'expired', 'cancelled', 'failed']);

/** The batch object. Output and error files are shown once the batch is finished. */
export function batchJson(b: Batch): Record<string, unknown> {
  const finished = FINISHED.has(b.status);
  return {
    id: b.id,
    object: 'batch',
    endpoint: b.endpoint,
    errors: b.errors === null ? null : { object: 'list', data: b.errors },
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: finished ? b.outputFileId : null,
    error_file_id: finished ? b.errorFileId : null,
    created_at: b.createdAt,
    in_progress_at: b.inProgressAt,
    expires_at: b.deadline,
    finalizing_at: b.finalizingAt,
    completed_at: b.completedAt,
    failed_at: b.failedAt,
    expired_at: b.expiredAt,
    cancelling_at: b.cancellingAt,
    cancelled_at: b.cancelledAt,
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
    usage: {
      input_tokens: b.promptTokens,
      output_tokens: b.completionTokens,
      total_tokens: b.promptTokens + b.completionTokens,
    },
  };
}

/** A list object with cursor fields. */
export function listJson<T>(page: Page<T>, item: (x: T) => Record<string, unknown>): Record<string, unknown> {
  const data = page.data.map(item);
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data.at(-1)?.id as string | undefined) ?? null,
    has_more: page.hasMore,
  };
}
