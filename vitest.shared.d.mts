import type { UserWorkspaceConfig } from 'vitest/config';
/** Project config shared by every workspace project (see vitest.shared.mjs). */
export function qProject(name: string, test?: Record<string, unknown>): UserWorkspaceConfig;
