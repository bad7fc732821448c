// `POST /v1/files`: the multipart body is parsed as it arrives (busboy) and the file part is
// streamed into the store a page of lines at a time, so a 200 MB upload never sits in memory.
import type http from 'node:http';
import busboy from 'busboy';
import { QError, QErrorCode } from '@q/schema';
import type { BatchFile, RequestStore } from '@q/store';

/** Limits of an upload. */
export interface UploadOptions {
  maxBytes: number;
  maxLines: number;
}

/** A refused upload: the HTTP 400 the client gets. */
export class UploadError extends Error {
  constructor(
    message: string,
    readonly param: string | null,
  ) {
    super(message);
  }
}

/**
 * Stores the `file` part of a multipart request for `tenant`; the form's `purpose` must be
 * `batch` (a file whose form says otherwise is deleted again: the parts may come in any order).
 */
export async function receiveUpload(req: http.IncomingMessage, store: RequestStore, tenant: string, opts: UploadOptions): Promise<BatchFile> {
  let bb: busboy.Busboy;
  try {
    bb = busboy({ headers: req.headers, limits: { files: 1, fields: 16, fieldSize: 64 * 1024, fileSize: opts.maxBytes + 1 } });
  } catch {
    throw new UploadError('The request must be multipart/form-data with a file and purpose=batch.', null);
  }
  const fields = new Map<string, string>();
  let upload: Promise<BatchFile> | undefined;
  bb.on('field', (name, value) => fields.set(name, value));
  bb.on('file', (name, stream, info) => {
    if (name !== 'file' || upload !== undefined) {
      stream.resume();
      return;
    }
    // A refused file (too big, too many lines) is still read to the end, so the form completes:
    // the store stops iterating, which must not destroy the part's stream.
    const chunks = stream.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
    upload = store.batches.uploadFile({ tenant, purpose: 'batch', filename: info.filename || 'upload.jsonl' }, chunks, opts);
    upload.catch(() => stream.resume());
  });
  await new Promise<void>((resolve, reject) => {
    bb.once('close', resolve);
    bb.once('error', reject);
    req.once('aborted', () => reject(new Error('upload aborted')));
    req.pipe(bb);
  });
  if (upload === undefined) throw new UploadError('The form must have a file part named file.', 'file');
  let file: BatchFile;
  try {
    file = await upload;
  } catch (err) {
    if (err instanceof QError && err.code === QErrorCode.INVALID_ARGUMENT)
      throw new UploadError(err.message.replace(/^uploadFile: /, ''), 'file');
    throw err;
  }
  if (fields.get('purpose') !== 'batch') {
    await store.batches.deleteFile(tenant, file.id);
    throw new UploadError("purpose must be 'batch'.", 'purpose');
  }
  return file;
}
