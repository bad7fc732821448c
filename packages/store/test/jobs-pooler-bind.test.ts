// `migrate: false` behind a transaction pooler used to bind silently to whatever schema the
// pooler's server connections had (`public`): the DSN's search_path option may not reach them
// (issue 34 item 14). The store now refuses a current schema without job tables there.
import { createTestSchema, type TestSchema } from '@q/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobStore } from '../src/index.js';
import { QError } from '@q/schema';

let migrated: TestSchema;
let empty: TestSchema;
beforeAll(async () => {
  migrated = await createTestSchema('jpbind');
  empty = await createTestSchema('jpbind_e');
  await (await JobStore.open(migrated.dsn, { maxConns: 1 })).close();
});
afterAll(async () => {
  await migrated?.drop();
  await empty?.drop();
});

it("pooler: 'transaction', migrate: false and no schema: a current schema without job tables is CONFIG, naming it", async () => {
  const err = await JobStore.open(empty.dsn, { maxConns: 1, pooler: 'transaction', migrate: false }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(QError);
  expect((err as QError).code).toBe('CONFIG');
  expect((err as QError).message).toContain(`"${empty.name}" has no job tables`);
  expect((err as QError).message).toMatch(/pass the schema option/);
});

it('the same options on a current schema that holds the tables, or with schema given, bind to it', async () => {
  const a = await JobStore.open(migrated.dsn, { maxConns: 1, pooler: 'transaction', migrate: false });
  await a.enqueue([{ queue: 'default', type: 't' }]);
  await a.close();
  const b = await JobStore.open(empty.dsn, { maxConns: 1, pooler: 'transaction', migrate: false, schema: migrated.name });
  expect((await b.list({})).jobs).toHaveLength(1);
  await b.close();
});
