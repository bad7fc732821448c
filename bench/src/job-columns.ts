/** q's job columns in table order (the hot table's and the archive's). */
export const JOB_COLUMNS: readonly string[] =
  'id,uuid,queue,job_type,payload,status,priority,run_at,attempt,max_attempts,idempotency_key,lock_key,leased_by,lease_token,lease_expires_at,heartbeat_at,cancel_requested_at,last_error,steps,result,retry_of_id,team_id,resource_id,correlation_id,dead_lettered_at,finished_at,created_at,updated_at,resume_count,snoozes,progress,job_key,job_group,limit_scope,limit_slot'.split(
    ',',
  );

/** What q's completion writes into the archive row of a succeeded job in place of the live row's columns. */
const ON_SUCCESS: Readonly<Record<string, string>> = {
  status: `'succeeded'`,
  leased_by: 'NULL',
  lease_token: 'NULL',
  lease_expires_at: 'NULL',
  result: `'null'`,
  finished_at: 'now()',
  updated_at: 'now()',
};

/** The select list that turns a live row (its columns by name) into its archive row on success. */
export const ARCHIVED_ON_SUCCESS = JOB_COLUMNS.map((c) => ON_SUCCESS[c] ?? c).join(', ');
