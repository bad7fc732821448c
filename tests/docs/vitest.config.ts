import { defineProject } from 'vitest/config';
import { qProject } from '../../vitest.shared.mjs';

// Reads files only: no database, so no global setup.
export default defineProject(qProject('docs', { globalSetup: [] }));
