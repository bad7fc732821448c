import { QError, redactSecretsOf } from '@q/schema';
import { databaseError, type StatementScope } from '@q/schema/internal';
import pg from 'pg';
import { tryMaintenanceSessionLock } from './sql/maintenance-lock.js';

/** A message on the job channel. */
export type JobNotification =
  /** Jobs became eligible in `queue` (enqueued, promoted or given back). */
  | { kind: 'queued'; queue: string }
  /** A cancel was requested for the leased/running job `id`. */
  | { kind: 'cancel'; id: number }
  /** A schedule was created or changed (`JobStore.upsertSchedule`): schedulers read again. */
  | { kind: 'schedules' };

/** Callbacks of {@link JobListener}. */
export interface JobListenerHandlers {
  /** A notification arrived. */
  onNotification(n: JobNotification): void;
  /** Jobs of this schema finished (a message of the finished channel, on which `JobStore.waitFor` listens). */
  onFinished?(): void;
  /** The connection came (back) up: notifications may have been missed meanwhile. */
  onConnected?(): void;
  /** The connection failed (a `QError`, code `CONNECTION`); the listener reconnects by itself. */
  onError?(err: Error): void;
}

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 10_000;

/**
 * A dedicated connection that LISTENs on the job channel and can hold the maintenance lock
 * (session-level, released when the connection closes, so a crashed holder frees it at once).
 * It reconnects with backoff; while it is down, callers keep polling.
 */
export class JobListener {
  #client: pg.Client | undefined;
  #closed = false;
  #leader = false;
  #retryMs = RECONNECT_MIN_MS;
  #timer: NodeJS.Timeout | undefined;
  #connecting: Promise<void> | undefined;
  /** null: never connects (a transaction pooler without a direct listenDsn). */
  readonly #dsn: string | pg.ClientConfig | null;
  readonly #channel: string;
  readonly #applicationName: string;
  readonly #handlers: JobListenerHandlers;
  readonly #scope: StatementScope;

  /** @internal Created by `JobStore.listen`. */
  constructor(
    dsn: string | pg.ClientConfig | null,
    channel: string,
    applicationName: string,
    handlers: JobListenerHandlers,
    scope: StatementScope,
  ) {
    this.#dsn = dsn;
    this.#channel = channel;
    this.#applicationName = applicationName;
    this.#handlers = handlers;
    this.#scope = scope;
  }

  /** True while the LISTEN connection is up. */
  get connected(): boolean {
    return this.#client !== undefined;
  }

  /** True while this listener holds the maintenance lock. */
  get isLeader(): boolean {
    return this.#leader;
  }

  /** Connects and LISTENs; a failure is reported to `onError` and retried in the background. */
  start(): Promise<void> {
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  /**
   * Holds or tries to take the maintenance lock: true when this process should run maintenance.
   * False while disconnected.
   *
   * @deprecated The worker's maintenance leader is a lease row now (`JobStore.acquireLeadership`),
   * which also works through a transaction pooler; this session advisory lock is kept for callers.
   */
  async tryLeadership(): Promise<boolean> {
    const client = this.#client;
    if (!client) return false;
    if (this.#leader) return true;
    try {
      this.#leader = await tryMaintenanceSessionLock(this.#scope, client);
    } catch (err) {
      this.#fail(client, err);
    }
    return this.#leader;
  }

  /** Closes the connection (releasing the lock). */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#connecting?.catch(() => undefined);
    const client = this.#client;
    this.#client = undefined;
    this.#leader = false;
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    if (this.#closed || this.#client || this.#dsn === null) return;
    const settings = typeof this.#dsn === 'string' ? { connectionString: this.#dsn } : this.#dsn;
    const client = new pg.Client({ ...settings, application_name: this.#applicationName });
    client.on('error', (err) => this.#fail(client, err));
    client.on('end', () => this.#fail(client, new Error('listener connection ended')));
    client.on('notification', (msg) => {
      if (msg.channel !== this.#channel || !msg.payload) return;
      if (msg.payload === 'f') return this.#handlers.onFinished?.();
      const n = parse(msg.payload);
      if (n) this.#handlers.onNotification(n);
    });
    try {
      await client.connect();
      // The channel is derived from the schema name (hex digest): a safe identifier.
      await client.query(`LISTEN ${client.escapeIdentifier(this.#channel)}`);
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      this.#report(err);
      this.#schedule();
      return;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    this.#retryMs = RECONNECT_MIN_MS;
    this.#handlers.onConnected?.();
  }

  #fail(client: pg.Client, err: unknown): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    this.#leader = false;
    client.removeAllListeners('end');
    client.end().catch(() => undefined);
    if (this.#closed) return;
    this.#report(err);
    this.#schedule();
  }

  #report(err: unknown): void {
    // Reported on every reconnect, and logged by workers: never a part of the DSN's password,
    // whatever the server or the resolver quotes of it.
    const e = databaseError('listen', err);
    const message = redactSecretsOf(e.message, this.#dsn);
    this.#handlers.onError?.(message === e.message ? e : new QError(e.code, message));
  }

  #schedule(): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.start(), this.#retryMs);
    this.#retryMs = Math.min(this.#retryMs * 2, RECONNECT_MAX_MS);
  }
}

function parse(payload: string): JobNotification | undefined {
  if (payload.startsWith('q:')) return { kind: 'queued', queue: payload.slice(2) };
  if (payload === 's') return { kind: 'schedules' };
  if (payload.startsWith('c:')) {
    const id = Number(payload.slice(2));
    return Number.isSafeInteger(id) ? { kind: 'cancel', id } : undefined;
  }
  return undefined;
}
