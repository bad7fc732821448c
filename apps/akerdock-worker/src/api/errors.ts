import type { FastifyError, FastifyReply } from 'fastify';
import { isQError } from '@q/schema';

/** An API failure with its HTTP status and stable code; rendered as `{ error: { code, message } }`. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Sends the JSON error body. */
export function sendError(reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  return reply.code(status).type('application/json').send({ error: { code, message } });
}

/**
 * Maps anything a route threw to a status, code and message. Validation and `QError`s keep their
 * (payload-free) message; unexpected errors become a bare 500 so nothing internal leaks.
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const fe = err as Partial<FastifyError>;
  if (fe.validation) {
    const first = fe.validation[0];
    if (first && fe.validationContext === 'querystring' && first.instancePath === '/limit') {
      return new ApiError(400, 'invalid_request', 'limit must be between 1 and 100');
    }
    return new ApiError(400, 'invalid_request', fe.message ?? 'invalid request');
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'payload_too_large', 'request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(400, 'invalid_request', 'the JSON body is empty');
    default:
      break;
  }
  if (isQError(err)) {
    switch (err.code) {
      case 'INVALID_ARGUMENT':
        return /cursor/i.test(err.message)
          ? new ApiError(400, 'invalid_cursor', 'invalid cursor')
          : new ApiError(400, 'invalid_request', err.message);
      case 'UNKNOWN_QUEUE':
        return new ApiError(400, 'unknown_queue', err.message);
      case 'NOT_FOUND':
        return new ApiError(404, 'not_found', 'no such job');
      case 'INVALID_STATE':
        return new ApiError(409, 'invalid_state', err.message);
      case 'DUPLICATE':
        return new ApiError(409, 'duplicate', err.message);
      default:
        break;
    }
  }
  // Fastify's own client errors (bad JSON, bad content-length) carry a 4xx status.
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new ApiError(fe.statusCode, 'invalid_request', fe.message ?? 'invalid request');
  }
  return new ApiError(500, 'internal', 'internal error');
}
