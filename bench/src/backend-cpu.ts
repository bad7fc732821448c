import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS = 100;

/**
 * utime + stime of a process in seconds, read from /proc (so the process, e.g. a Postgres
 * backend, must run on this machine). Throws when the process has gone.
 */
export function cpuSeconds(pid: number): number {
  // Fields after the command (which may hold spaces) start after the last ')'.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop()?.trim().split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}
