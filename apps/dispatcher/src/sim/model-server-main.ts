// The simulated model server in a process of its own (tests and the saturation demo), so that
// the interactive probe's latencies measure the server, not a busy dispatcher's event loop.
// Options as JSON in argv[2]; driven over IPC: probe-start, probe-stop, stats, reset, close.
import { Probe, startModelServer, type ModelServerOptions } from './model-server.js';

const opts = JSON.parse(process.argv[2] ?? '{}') as ModelServerOptions;
const server = await startModelServer(opts);
let probe: Probe | undefined;

type Command = { id: number; cmd: 'probe-start'; everyMs?: number } | { id: number; cmd: 'probe-stop' | 'stats' | 'reset' | 'close' };

process.on('message', (m: Command) => {
  const reply = (data: unknown) => process.send?.({ id: m.id, data });
  switch (m.cmd) {
    case 'probe-start':
      probe = new Probe();
      probe.start(server.url, m.everyMs ?? 20);
      return reply(null);
    case 'probe-stop':
      return reply(probe?.stop() ?? null);
    case 'stats':
      return reply({
        maxSaturation: server.maxSaturation(),
        served: server.served(),
        timeline: server.timeline(),
        running: server.running(),
        waiting: server.waiting(),
      });
    case 'reset':
      server.resetStats();
      return reply(null);
    case 'close':
      void server.close().then(() => {
        reply(null);
        process.exit(0);
      });
      return;
  }
});
process.on('disconnect', () => process.exit(0));
process.send?.({ ready: server.url });
