import { request } from 'undici';
import type { FlowJson, JobJson } from '../api/job-json.js';
import type { ScheduleJson } from '../api/schedule-json.js';

/** A non-2xx answer of the admin API. */
export class ApiCallError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiCallError';
  }
}

/** A page of `GET /jobs`. */
export interface JobPage {
  data: JobJson[];
  next_cursor: string | null;
}

/** Answer of `POST /jobs/:uuid/retry`. */
export interface RetryAnswer {
  job_uuid: string;
  status_url: string;
  job: JobJson;
}

/** Answer of `GET /schedules`. */
export interface ScheduleList {
  data: ScheduleJson[];
}

/** Answer of `POST /flows/:id/cancel`. */
export interface FlowCancelAnswer {
  cancelled: number;
  cancel_requested: number;
  flow: FlowJson;
}

/** Thin typed client of the admin API (what `q-jobs` uses; handy in scripts and tests too). */
export class AdminClient {
  readonly #baseUrl: string;
  readonly #token: string | undefined;

  constructor(baseUrl: string, token: string | undefined) {
    this.#baseUrl = baseUrl;
    this.#token = token;
  }

  /** The admin API's base URL. */
  get url(): string {
    return this.#baseUrl;
  }

  enqueue(body: Record<string, unknown>, idempotencyKey?: string): Promise<JobJson> {
    return this.#call('POST', '/jobs', body, idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey });
  }
  list(query: Record<string, string | number | undefined>): Promise<JobPage> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
    const s = qs.toString();
    return this.#call('GET', `/jobs${s ? `?${s}` : ''}`);
  }
  get(uuid: string): Promise<JobJson> {
    return this.#call('GET', `/jobs/${encodeURIComponent(uuid)}`);
  }
  retry(uuid: string, idempotencyKey?: string): Promise<RetryAnswer> {
    return this.#call(
      'POST',
      `/jobs/${encodeURIComponent(uuid)}/retry`,
      undefined,
      idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey },
    );
  }
  forget(uuid: string): Promise<JobJson> {
    return this.#call('POST', `/jobs/${encodeURIComponent(uuid)}/forget`);
  }
  cancel(uuid: string): Promise<JobJson> {
    return this.#call('POST', `/jobs/${encodeURIComponent(uuid)}/cancel`);
  }

  /** `GET /flows/{id}`: the flow with its nodes and edges. */
  flow(id: string): Promise<FlowJson> {
    return this.#call('GET', `/flows/${encodeURIComponent(id)}`);
  }
  /** `POST /flows/{id}/cancel`: cancels every live node of the flow. */
  cancelFlow(id: string): Promise<FlowCancelAnswer> {
    return this.#call('POST', `/flows/${encodeURIComponent(id)}/cancel`);
  }

  /** `POST /flows/{id}/retry`: runs the flow's failed nodes (and with `failed-and-downstream`, what finished below them) again. */
  retryFlow(id: string, mode: 'failed' | 'failed-and-downstream'): Promise<{ retried: number; flow: FlowJson }> {
    return this.#call('POST', `/flows/${encodeURIComponent(id)}/retry`, { mode });
  }

  schedules(): Promise<ScheduleList> {
    return this.#call('GET', '/schedules');
  }
  /** `PUT /schedules/{name}`: creates or replaces the schedule `name`. */
  putSchedule(name: string, body: Record<string, unknown>): Promise<ScheduleJson> {
    return this.#call('PUT', `/schedules/${encodeURIComponent(name)}`, body);
  }
  /** `POST /schedules/{name}/pause` or `/resume`: an `ApiCallError` 404 when there is none. */
  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleJson> {
    return this.#call('POST', `/schedules/${encodeURIComponent(name)}/${paused ? 'pause' : 'resume'}`);
  }
  /** `DELETE /schedules/{name}`: an `ApiCallError` 404 when there is none. */
  async removeSchedule(name: string): Promise<void> {
    await this.#call('DELETE', `/schedules/${encodeURIComponent(name)}`);
  }

  async #call<T>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const h: Record<string, string> = { accept: 'application/json', ...headers };
    if (this.#token !== undefined) h.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) h['content-type'] = 'application/json';
    const res = await request(new URL(path, this.#baseUrl), {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      throw new ApiCallError(res.statusCode, 'bad_response', `HTTP ${res.statusCode}: the answer is not JSON`);
    }
    if (res.statusCode >= 400) {
      const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new ApiCallError(res.statusCode, err?.code ?? 'http_error', err?.message ?? `HTTP ${res.statusCode}`);
    }
    return json as T;
  }
}
