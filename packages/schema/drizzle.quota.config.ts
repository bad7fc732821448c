import { defineConfig } from 'drizzle-kit';

// Generates the 'quota' migration module: pnpm --filter @q/schema generate
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/tables/quota.ts',
  out: './drizzle/quota',
});
