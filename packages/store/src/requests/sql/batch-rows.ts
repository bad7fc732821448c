// The row shapes of the Batch API tables (migration requests/0004_batch_api) and their mappers,
// shared by the batch and file statements.
import type { Batch, BatchFile, BatchLineError, BatchStatus } from '../batch-types.js';
import { num } from './db.js';

/** The database clock in Unix seconds, as the batch statements write it. */
export const NOW_SECONDS = `extract(epoch FROM clock_timestamp())::bigint`;

/** The database clock in Unix milliseconds. */
export const NOW_MS = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;

/** The columns of `q_batch_files` a statement returns. */
export const FILE_COLUMNS = `id, tenant, purpose, filename, bytes, lines, status, created_at, expires_at`;

/** A `q_batch_files` row. */
export interface FileRow {
  id: string;
  tenant: string;
  purpose: string;
  filename: string;
  bytes: string;
  lines: number;
  status: string;
  created_at: string;
  expires_at: string;
}

/** A file from its row. */
export function fileOf(r: FileRow): BatchFile {
  return {
    id: r.id,
    tenant: r.tenant,
    purpose: r.purpose,
    filename: r.filename,
    bytes: num(r.bytes),
    lines: r.lines,
    status: r.status === 'processed' ? 'processed' : 'uploading',
    createdAt: num(r.created_at),
    expiresAt: num(r.expires_at),
  };
}

/** The columns of `q_batches` a statement returns. */
export const BATCH_COLUMNS = `id, tenant, endpoint, queue, input_file_id, output_file_id, error_file_id, status, completion_window,
  deadline, metadata, errors, total, completed, failed, enqueued_lines, prompt_tokens, completion_tokens, created_at,
  in_progress_at, finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at`;

/** A `q_batches` row. */
export interface BatchRow {
  id: string;
  tenant: string;
  endpoint: string;
  queue: string;
  input_file_id: string;
  output_file_id: string | null;
  error_file_id: string | null;
  status: string;
  completion_window: string;
  deadline: string;
  metadata: Record<string, string> | null;
  errors: BatchLineError[] | null;
  total: number;
  completed: number;
  failed: number;
  enqueued_lines: number;
  prompt_tokens: string;
  completion_tokens: string;
  created_at: string;
  in_progress_at: string | null;
  finalizing_at: string | null;
  completed_at: string | null;
  failed_at: string | null;
  expired_at: string | null;
  cancelling_at: string | null;
  cancelled_at: string | null;
}

const opt = (v: string | null): number | null => (v === null ? null : num(v));

/** A batch from its row. */
export function batchOf(r: BatchRow): Batch {
  return {
    id: r.id,
    tenant: r.tenant,
    endpoint: r.endpoint,
    queue: r.queue,
    inputFileId: r.input_file_id,
    outputFileId: r.output_file_id,
    errorFileId: r.error_file_id,
    status: r.status as BatchStatus,
    completionWindow: r.completion_window,
    deadline: num(r.deadline),
    metadata: r.metadata,
    errors: r.errors,
    total: r.total,
    completed: r.completed,
    failed: r.failed,
    enqueuedLines: r.enqueued_lines,
    promptTokens: num(r.prompt_tokens),
    completionTokens: num(r.completion_tokens),
    createdAt: num(r.created_at),
    inProgressAt: opt(r.in_progress_at),
    finalizingAt: opt(r.finalizing_at),
    completedAt: opt(r.completed_at),
    failedAt: opt(r.failed_at),
    expiredAt: opt(r.expired_at),
    cancellingAt: opt(r.cancelling_at),
    cancelledAt: opt(r.cancelled_at),
  };
}
