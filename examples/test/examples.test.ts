import { createTestSchema } from '@q/testing';
import { expect, it } from 'vitest';
import { main as migrateSchema } from '../migrate-schema.js';

it('migrate-schema.ts creates every q table in the given schema', async () => {
  const schema = await createTestSchema('ex');
  try {
    const tables = await migrateSchema(schema.dsn);
    expect(tables).toEqual(expect.arrayContaining(['q_requests', 'q_quota_slots', 'q_jobs', 'q_schema_migrations']));
  } finally {
    await schema.drop();
  }
});
