// deliverAsStep, the delivery both HTTP handlers (webhook.deliver, notify.send) share: the step it
// closes and the error it throws for each verdict, against a real receiver on loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GiveUpError } from '../src/handlers/give-up.js';
import { deliverAsStep } from '../src/handlers/http-post.js';
import { startReceiver, type Receiver } from './receiver.js';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver(({ path }) => Number(path.slice(1)));
});
afterAll(async () => {
  await receiver?.close();
});

/** Delivers to `/<status>` as attempt 2 of job `u-<status>`; returns the steps started, what the step recorded and how the call ended. */
async function deliver(status: number) {
  const started: string[] = [];
  const recorded: string[] = [];
  const steps = {
    start: async (name: string) => void started.push(name),
    succeed: async (m?: string) => void recorded.push(`succeed ${m}`),
    fail: async (m?: string) => void recorded.push(`fail ${m}`),
  };
  const outcome = await deliverAsStep(
    { uuid: `u-${status}`, attempt: 2 },
    steps,
    { step: 'deliver', op: 'webhook.deliver', what: 'delivery' },
    { url: `${receiver.url}/${status}`, body: '{}', secret: 's', timeoutMs: 5_000, signal: new AbortController().signal },
  ).then(
    (out) => ({ out }),
    (err: unknown) => ({ err }),
  );
  return { started, recorded, outcome };
}

describe('deliverAsStep', () => {
  it('2xx: the step succeeds and the outcome is returned; the job uuid is the idempotency key', async () => {
    const { started, recorded, outcome } = await deliver(204);
    expect(started).toEqual(['deliver']); // the delivery is the step it starts
    expect(outcome).toMatchObject({ out: { verdict: 'delivered', status: 204 } });
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatch(/^succeed HTTP 204 after \d+ ms \(attempt 2\)$/);
    expect(receiver.byKey.get('u-204')?.[0]?.headers['x-q-delivery-attempt']).toBe('2');
  });

  it('a 4xx the receiver will never accept: the step fails and the job gives up, naming the op and the refusal', async () => {
    const { recorded, outcome } = await deliver(410);
    expect(recorded[0]).toMatch(/^fail HTTP 410 after \d+ ms \(attempt 2\)$/);
    const err = (outcome as { err: unknown }).err;
    expect(err).toBeInstanceOf(GiveUpError);
    expect((err as Error).message).toBe('webhook.deliver: receiver refused the delivery: HTTP 410');
  });

  it('5xx: the step fails and a plain error asks for a retry', async () => {
    const { recorded, outcome } = await deliver(503);
    expect(recorded[0]).toMatch(/^fail HTTP 503 after \d+ ms \(attempt 2\)$/);
    const err = (outcome as { err: unknown }).err;
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(GiveUpError);
    expect((err as Error).message).toBe('webhook.deliver: HTTP 503; will retry');
  });
});
