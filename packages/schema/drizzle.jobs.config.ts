import { defineConfig } from 'drizzle-kit';

// Generates the 'jobs' migration module: pnpm --filter @q/schema generate
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/tables/jobs.ts',
  out: './drizzle/jobs',
});
