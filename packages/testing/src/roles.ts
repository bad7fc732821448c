import pg from 'pg';
import type { TestSchema } from './schema.js';

/** Login roles made for one test file, with their DSNs on its schema; {@link TestRoles.drop} removes them. */
export interface TestRoles {
  /** Creates role `<schema>_<suffix>`, runs `grants(role)` as the admin, returns its DSN on the test schema. */
  dsn(suffix: string, grants: (role: string) => string[]): Promise<string>;
  /** Drops what the roles own and the roles, then closes the admin pool. */
  drop(): Promise<void>;
}

/**
 * Roles with limited privileges (read-only, no grants, …) for tests of how q reports a
 * permission problem. The roles are cluster-wide, so `drop()` belongs in `afterAll`.
 */
export function testRoles(schema: TestSchema): TestRoles {
  const admin = new pg.Pool({ connectionString: schema.serverDsn, max: 2 });
  admin.on('error', () => undefined);
  const roles: string[] = [];
  return {
    async dsn(suffix, grants) {
      const role = `${schema.name}_${suffix}`;
      await admin.query(`CREATE ROLE "${role}" LOGIN`);
      roles.push(role);
      for (const g of grants(role)) await admin.query(g);
      const u = new URL(schema.dsn);
      u.username = role;
      return u.toString();
    },
    async drop() {
      for (const r of roles.splice(0)) {
        await admin.query(`DROP OWNED BY "${r}" CASCADE`);
        await admin.query(`DROP ROLE "${r}"`);
      }
      await admin.end();
    },
  };
}
