// The Batch API's stored objects (migration requests/0004_batch_api), as the store returns them.

/** Where a batch is: `validating` → `in_progress` → `finalizing` → `completed`, or `failed`, `expired`, `cancelling` → `cancelled`. */
export type BatchStatus = 'validating' | 'failed' | 'in_progress' | 'finalizing' | 'completed' | 'expired' | 'cancelling' | 'cancelled';

/** The batch statuses a driver still works on (the others are final). */
export const UNFINISHED_BATCH_STATUSES: readonly BatchStatus[] = ['validating', 'in_progress', 'finalizing', 'cancelling'];

/** A stored file: a batch input (`purpose` `batch`) or a batch's output or error file (`batch_output`). */
export interface BatchFile {
  /** `file-…`. */
  id: string;
  tenant: string;
  purpose: string;
  filename: string;
  /** Size in bytes (the sum of its lines). */
  bytes: number;
  /** Number of lines (a last line without a newline counts). */
  lines: number;
  /** `uploading` until the last line is written, then `processed`. */
  status: 'uploading' | 'processed';
  /** Unix seconds, database clock. */
  createdAt: number;
  /** Unix seconds; 0 = never. */
  expiresAt: number;
}

/** One line of a file: its number (from 1) and its bytes, terminator included. */
export interface BatchFileLine {
  lineNo: number;
  content: Uint8Array;
}

/** A validation error of a batch's input, as `errors.data[]` shows it. */
export interface BatchLineError {
  /** e.g. `invalid_json_line`, `duplicate_custom_id`, `invalid_url`. */
  code: string;
  message: string;
  /** The field at fault, when one is. */
  param: string | null;
  /** The input line (from 1), when one is at fault. */
  line: number | null;
}

/** A stored batch. Times are Unix seconds on the database clock, `null` until reached. */
export interface Batch {
  /** `batch_…`. */
  id: string;
  tenant: string;
  /** `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings` or `/v1/responses`. */
  endpoint: string;
  /** The request queue its lines go to. */
  queue: string;
  inputFileId: string;
  /** Created with the batch; a client is shown it once the batch is finished (null when it stayed empty). */
  outputFileId: string | null;
  errorFileId: string | null;
  status: BatchStatus;
  completionWindow: string;
  /** Unix seconds: creation plus the window, the deadline of each of its requests. */
  deadline: number;
  metadata: Record<string, string> | null;
  errors: BatchLineError[] | null;
  /** Request lines of the input (known once validated). */
  total: number;
  completed: number;
  failed: number;
  /** Input lines already turned into requests. */
  enqueuedLines: number;
  promptTokens: number;
  completionTokens: number;
  createdAt: number;
  inProgressAt: number | null;
  finalizingAt: number | null;
  completedAt: number | null;
  failedAt: number | null;
  expiredAt: number | null;
  cancellingAt: number | null;
  cancelledAt: number | null;
}

/** What creating a batch takes. */
export interface NewBatch {
  tenant: string;
  inputFileId: string;
  endpoint: string;
  /** The request queue its lines go to. */
  queue: string;
  /** As the client wrote it (`24h`). */
  completionWindow: string;
  /** The window in seconds (> 0). */
  windowSeconds: number;
  metadata?: Record<string, string> | null;
}

/** One request line of a batch, validated: its line number, its `custom_id` and the request-queue request id it becomes. */
export interface BatchRequestLine {
  lineNo: number;
  customId: string;
  requestId: string;
}

/** The result of one request line, already rendered as its output- or error-file line. */
export interface BatchLineResult {
  lineNo: number;
  /** True: goes to the output file and counts as completed; false: the error file, failed. */
  ok: boolean;
  /** The JSONL line, newline included. */
  line: Uint8Array;
  promptTokens?: number;
  completionTokens?: number;
}

/** A page of a listing: the items and whether more follow. */
export interface Page<T> {
  data: T[];
  hasMore: boolean;
}
