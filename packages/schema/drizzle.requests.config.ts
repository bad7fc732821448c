import { defineConfig } from 'drizzle-kit';

// Generates the 'requests' migration module: pnpm --filter @q/schema generate
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/tables/requests.ts',
  out: './drizzle/requests',
});
