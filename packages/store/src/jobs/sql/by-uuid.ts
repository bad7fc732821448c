/**
 * The condition that finds the live job (in `q_jobs`, as `alias`) whose uuid is `param`.
 *
 * The hot table has no index on uuid (migration 0007): a uuid q writes carries its job's id
 * (q_job_uuid; the table's check q_jobs_uuid_carries_id holds every version-8 uuid to its row's
 * id), so the job is found by its primary key and checked against the uuid. A row whose uuid is
 * of another version (made before 0007, or inserted with the column default) is found through
 * the partial index q_jobs_other_uuid_key, whose predicate the second arm spells out exactly so
 * the planner can use it. At most one row matches: a uuid that carries an id names that row only,
 * and one of another version is unique in the partial index.
 */
export function liveJobByUuid(alias: string, param: string): string {
  return `${alias}.uuid = ${param}::uuid AND (${alias}.id = __q_schema__.q_job_uuid_id(${param}::uuid)
       OR __q_schema__.q_job_uuid_version(${alias}.uuid) <> 8)`;
}
