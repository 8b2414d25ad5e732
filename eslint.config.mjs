// ESLint flat config for the TypeScript sources: the labextension's and the GPU console page's.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    ignores: [
      '.venv/',
      'node_modules/',
      'lib/',
      'jupyter_gpuaas/labextension/',
      'culler/gpuaas_service/console/static/',
      'labextension/style/',
      '**/*.js',
      '**/*.mjs',
      // generated from the OpenAPI documents by openapi-typescript (make api-types)
      'labextension/src/extensionApi.ts',
      'culler/gpuaas_service/console/src/serviceApi.ts'
    ]
  },
  {
    files: [
      'labextension/src/**/*.ts',
      'labextension/test/**/*.ts',
      'culler/gpuaas_service/console/src/**/*.ts'
    ],
    extends: [
      js.configs.recommended,
      tseslint.configs.strictTypeChecked,
      tseslint.configs.stylisticTypeChecked
    ],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname
      }
    },
    rules: {
      curly: ['error', 'all'],
      eqeqeq: ['error', 'smart'],
      'no-console': ['error', { allow: ['error', 'warn'] }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/explicit-module-boundary-types': 'error',
      '@typescript-eslint/naming-convention': [
        'error',
        {
          selector: 'interface',
          format: ['PascalCase'],
          custom: { regex: '^I[A-Z]', match: true }
        }
      ],
      // The TypeScript side of ruff's C901 at its default height (McCabe 10).
      complexity: ['error', { max: 10 }],
      // Lumino's idiom: a class and a namespace of the same name for its options.
      '@typescript-eslint/no-namespace': 'off'
    }
  },
  {
    // node:test's describe() and test() return promises that the runner awaits.
    files: ['labextension/test/**/*.ts'],
    rules: { '@typescript-eslint/no-floating-promises': 'off' }
  }
);
