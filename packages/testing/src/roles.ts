import pg from 'pg';
import type { TestSchema } from './schema.js';

/** Login roles made for one test file, with their DSNs on its schema; {@link TestRoles.drop} removes them. */
export interface TestRoles {
  /** Creates role `<schema>_<suffix>`, runs `grants(role)` as the admin, returns its DSN on the test schema. */
  dsn(suffix: string, grants: (role: string) => string[]): Promise<string>;
  /**
   * The grants that let `role` use the test schema and read and write everything in it (tables,
   * sequences, functions) without owning it: what q's stores need at run time, never DDL.
   */
  readWriteGrants(role: string): string[];
  /** A role with {@link TestRoles.readWriteGrants} whose transactions are read-only (`default_transaction_read_only`). */
  readOnlyDsn(suffix: string): Promise<string>;
  /** A role that may use the schema but not one object in it (every statement: permission denied). */
  noGrantsDsn(suffix: string): Promise<string>;
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
  const usage = (r: string) => `GRANT USAGE ON SCHEMA "${schema.name}" TO "${r}"`;
  const readWriteGrants = (r: string) => [
    usage(r),
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema.name}" TO "${r}"`,
    `GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema.name}" TO "${r}"`,
    `GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "${schema.name}" TO "${r}"`,
  ];
  const dsn = async (suffix: string, grants: (role: string) => string[]) => {
    const role = `${schema.name}_${suffix}`;
    await admin.query(`CREATE ROLE "${role}" LOGIN`);
    roles.push(role);
    for (const g of grants(role)) await admin.query(g);
    const u = new URL(schema.dsn);
    u.username = role;
    return u.toString();
  };
  return {
    dsn,
    readWriteGrants,
    readOnlyDsn: (suffix) => dsn(suffix, (r) => [...readWriteGrants(r), `ALTER ROLE "${r}" SET default_transaction_read_only = on`]),
    noGrantsDsn: (suffix) => dsn(suffix, (r) => [usage(r)]),
    async drop() {
      for (const r of roles.splice(0)) {
        await admin.query(`DROP OWNED BY "${r}" CASCADE`);
        await admin.query(`DROP ROLE "${r}"`);
      }
      await admin.end();
    },
  };
}
