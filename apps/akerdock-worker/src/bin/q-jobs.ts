#!/usr/bin/env node
// q-jobs: the operator CLI of the admin API.
import { runCli } from '../cli/q-jobs.js';

process.exitCode = await runCli(process.argv.slice(2), process.env, {
  out: (t) => process.stdout.write(`${t}\n`),
  err: (t) => process.stderr.write(`${t}\n`),
});
