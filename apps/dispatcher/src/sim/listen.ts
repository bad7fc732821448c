// Puts a simulated server on loopback: the one start-up and shut-down of both sims.
import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A server listening on 127.0.0.1. */
export interface Listening {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Drops every open connection, then stops listening. */
  close(): Promise<void>;
}

/**
 * Listens on `127.0.0.1:port` (0: any free port). The keep-alive timeout is above the
 * dispatcher's client (90 s), so the server never closes a socket the client is about to reuse.
 */
export async function listenOnLoopback(server: http.Server, port = 0): Promise<Listening> {
  server.keepAliveTimeout = 95_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
