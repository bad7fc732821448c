export { createTestSchema, dsnWithSchema, testDatabaseUrl, type TestSchema } from './schema.js';
export { acquireServer, releaseServer, type ServerSource } from './server.js';
