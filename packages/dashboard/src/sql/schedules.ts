import { statement } from '@q/schema/internal';

/** Every schedule with its next and last slot, and since when it is paused (null: running). */
export const SCHEDULES = statement(
  'q_dashboard_schedules',
  `SELECT name, cron, timezone, queue, job_type, next_fire_at, last_slot, paused_at
     FROM __q_schema__.q_schedules
    ORDER BY name
    LIMIT 1000`,
);
