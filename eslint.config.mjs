import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/drizzle/**', '.q/**'] },
  js.configs.recommended,
  // strict: recommended plus the rules that catch likely bugs (non-null assertions, extraneous classes, …).
  ...tseslint.configs.strict,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // In a test a missing value must fail the test where it is read: `rows[0]!.id` throws there, which is
    // the assertion we want (a `?.` would turn it into a confusing mismatch further on).
    files: ['**/test/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
  // Formatting belongs to Prettier (`pnpm format`); turn off the stylistic rules that would fight it.
  prettier,
);
