import { defineProject } from 'vitest/config';
import { qProject } from '../../vitest.shared.mjs';

export default defineProject(qProject('dashboard'));
