import { defineProject } from 'vitest/config';
import { qProject } from '../../vitest.shared.mjs';

const config = qProject('akerdock-worker');
// @opentelemetry/* publish a `module` export condition pointing at an ESM build with extensionless
// imports that Node cannot load; vite's default conditions pick it for externalised deps.
const withoutModule = (c: string[]) => c.filter((x) => x !== 'module');
config.resolve.conditions = withoutModule(config.resolve.conditions);
config.ssr.resolve.conditions = withoutModule(config.ssr.resolve.conditions);

export default defineProject(config);
