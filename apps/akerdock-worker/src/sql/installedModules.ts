import type pg from 'pg';

/** Which other q modules are migrated in the connection's schema (the purge only touches those). */
export async function installedModules(pool: pg.Pool): Promise<{ requests: boolean; quota: boolean }> {
  const { rows } = await pool.query<{ requests: boolean; quota: boolean }>({
    name: 'akerdock_installed_modules',
    text: `SELECT to_regclass('q_results') IS NOT NULL AS requests,
                  to_regclass('q_quota_admits') IS NOT NULL AS quota`,
  });
  return rows[0] ?? { requests: false, quota: false };
}
