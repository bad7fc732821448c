import net from 'node:net';
import { Transform } from 'node:stream';

/**
 * A TCP proxy on loopback between an application and Postgres that can cut, stall or blackhole
 * traffic on demand — the network faults a managed database or a pooler produces.
 */
export class FaultProxy {
  private server: net.Server | undefined;
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket | undefined }>();
  private holdUntil = 0;
  private heldTimer: NodeJS.Timeout | undefined;
  private readonly waiting: Array<() => void> = [];
  private cutMarker: Buffer | undefined;
  private cutUntil = 0;
  private dropMarker: Buffer | undefined;
  private dropsLeft = 0;
  /** Replies dropped by {@link FaultProxy.dropReplyTo} so far. */
  drops = 0;
  /** Connections accepted so far. */
  accepted = 0;
  /** Connections reset by {@link FaultProxy.cutOn} so far. */
  cuts = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  /** Listens on 127.0.0.1 and returns the port. */
  async listen(): Promise<number> {
    const server = net.createServer((client) => this.accept(client));
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as net.AddressInfo).port;
  }

  /** Resets every open connection (both sides see the connection drop). */
  dropAll(): number {
    const n = this.pairs.size;
    for (const p of this.pairs) {
      p.client.resetAndDestroy();
      p.upstream?.resetAndDestroy();
    }
    this.pairs.clear();
    return n;
  }

  /**
   * Blackholes Postgres for `ms`: bytes in both directions are held (not lost) and new
   * connections wait unanswered, as when a route disappears; afterwards traffic flows again.
   */
  blackhole(ms: number): void {
    this.holdUntil = Date.now() + ms;
    for (const p of this.pairs) {
      p.client.pause();
      p.upstream?.pause();
    }
    clearTimeout(this.heldTimer);
    this.heldTimer = setTimeout(() => this.release(), ms);
  }

  /**
   * For `ms`, resets every connection the moment its client sends bytes containing `marker`
   * (e.g. a prepared statement's name, sent with every Parse and Bind of it), before Postgres
   * sees them: that one statement fails with a connection error, every other one flows.
   */
  cutOn(marker: string, ms: number): void {
    this.cutMarker = Buffer.from(marker, 'utf8');
    this.cutUntil = Date.now() + ms;
  }

  /**
   * For the next `times` statements whose bytes from the client contain `marker`: the statement
   * reaches Postgres (which runs and commits it), but its reply never reaches the client — the
   * proxy swallows it, waits `settleMs` (so the commit is surely done) and resets the connection.
   * The client sees a connection error for a statement that did take effect: a lost reply.
   */
  dropReplyTo(marker: string, times: number, settleMs = 100): void {
    this.dropMarker = Buffer.from(marker, 'utf8');
    this.dropsLeft = times;
    this.dropSettleMs = settleMs;
  }

  private dropSettleMs = 100;

  /** Stops listening and drops every connection. */
  async close(): Promise<void> {
    clearTimeout(this.heldTimer);
    this.release();
    this.dropAll();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private release(): void {
    this.holdUntil = 0;
    for (const p of this.pairs) {
      p.client.resume();
      p.upstream?.resume();
    }
    for (const go of this.waiting.splice(0)) go();
  }

  private accept(client: net.Socket): void {
    this.accepted += 1;
    const pair: { client: net.Socket; upstream: net.Socket | undefined; dropping: boolean } = { client, upstream: undefined, dropping: false };
    this.pairs.add(pair);
    client.on('error', () => undefined);
    client.pause();
    const connect = () => {
      if (client.destroyed) return;
      const upstream = net.connect(this.target.port, this.target.host);
      pair.upstream = upstream;
      upstream.on('error', () => client.destroy());
      client.on('close', () => {
        upstream.destroy();
        this.pairs.delete(pair);
      });
      upstream.on('close', () => {
        client.destroy();
        this.pairs.delete(pair);
      });
      const cutter = new Transform({
        transform: (chunk: Buffer, _enc, done) => {
          if (this.cutMarker && Date.now() < this.cutUntil && chunk.includes(this.cutMarker)) {
            this.cuts += 1;
            client.resetAndDestroy();
            upstream.resetAndDestroy();
            this.pairs.delete(pair);
            done();
            return;
          }
          if (this.dropMarker && this.dropsLeft > 0 && !pair.dropping && chunk.includes(this.dropMarker)) {
            this.dropsLeft -= 1;
            this.drops += 1;
            pair.dropping = true;
          }
          done(null, chunk);
        },
      });
      cutter.on('error', () => undefined);
      // While dropping, the server's reply is swallowed; once it has started (the statement ran),
      // the connection is reset after the settle time.
      const replies = new Transform({
        transform: (chunk: Buffer, _enc, done) => {
          if (!pair.dropping) {
            done(null, chunk);
            return;
          }
          done();
          setTimeout(() => {
            client.resetAndDestroy();
            upstream.resetAndDestroy();
            this.pairs.delete(pair);
          }, this.dropSettleMs);
        },
      });
      replies.on('error', () => undefined);
      client.pipe(cutter).pipe(upstream);
      upstream.pipe(replies).pipe(client);
      if (Date.now() < this.holdUntil) upstream.pause();
      else client.resume();
    };
    if (Date.now() < this.holdUntil) this.waiting.push(connect);
    else connect();
  }
}
