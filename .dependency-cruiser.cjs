/**
 * The import rules of src/, checked by dependency-cruiser (`npm run lint:imports`, part of
 * `npm test`). Type-only imports count like any other: a type belongs to the room that owns it.
 *
 * The memory core is split into rooms, each importing only the rooms before it in MEMORY_ROOMS
 * (and src/internal/, src/errors.ts; src/api/ from remote/ on). `rules/` is pure: it imports only
 * `rules/` (plus src/errors.ts and src/internal/assert-never.ts, which import nothing but each
 * other), so no `node:*` module, no package and no I/O reaches a decision.
 */

/** The memory rooms, lowest first: a room may import the ones before it, never the ones after. */
const MEMORY_ROOMS = ['rules', 'disk', 'remote', 'journal', 'sync', 'mount'];

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

// rules/ has a stricter rule of its own below (memory-rules-only-rules); the last room may import every other.
const roomOrderRules = MEMORY_ROOMS.slice(1, -1).map((room, j) => {
  const i = j + 1;
  const later = MEMORY_ROOMS.slice(i + 1);
  return {
    name: `memory-${room}-imports-down`,
    comment:
      `src/memory/${room}/ may import only the rooms before it (${MEMORY_ROOMS.slice(0, i + 1).join(', ')}); ` +
      `it imports neither ${later.join(', ')} nor the barrel files at src/memory/'s top.`,
    severity: 'error',
    from: { path: `^src/memory/${esc(room)}/` },
    to: { path: [`^src/memory/(${later.map(esc).join('|')})/`, '^src/memory/[^/]+$'] },
  };
});

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycle anywhere in src/ (type-only imports included): break it by moving the shared piece to the lower file.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-unresolvable',
      comment: 'Every import resolves; an import the tool cannot follow would escape every other rule.',
      severity: 'error',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
    {
      name: 'memory-rules-no-node',
      comment: 'src/memory/rules/ is pure: no node:* module (no file, clock or process access).',
      severity: 'error',
      from: { path: '^src/memory/rules/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'memory-rules-only-rules',
      comment: 'src/memory/rules/ imports only rules/ (and src/errors.ts, src/internal/assert-never.ts): no package, no other room.',
      severity: 'error',
      from: { path: '^src/memory/rules/' },
      to: { pathNot: ['^src/memory/rules/', '^src/errors\\.ts$', '^src/internal/assert-never\\.ts$'] },
    },
    ...roomOrderRules,
    {
      name: 'memory-no-outer-rooms',
      comment:
        'src/memory/ is a library core: from src/ it imports only itself, src/internal/, src/api/ and src/errors.ts, ' +
        'never the worker, the CLI, the webhook, the launcher or any other caller.',
      severity: 'error',
      from: { path: '^src/memory/' },
      to: { path: '^src/', pathNot: ['^src/(memory|internal|api)/', '^src/errors\\.ts$'] },
    },
    {
      name: 'memory-api-not-in-rules-disk',
      comment: 'The remote API transport (src/api/) is reached from remote/ on, never from rules/ or disk/.',
      severity: 'error',
      from: { path: '^src/memory/(rules|disk)/' },
      to: { path: '^src/api/' },
    },
    {
      name: 'sandbox-no-callers',
      comment:
        'src/sandbox/ (the per-session tool host and its bubblewrap view) imports only itself, src/internal/ and ' +
        'src/errors.ts: the worker uses it, never the other way round.',
      severity: 'error',
      from: { path: '^src/sandbox/' },
      to: { path: '^src/', pathNot: ['^src/(sandbox|internal)/', '^src/errors\\.ts$'] },
    },
    {
      name: 'sandbox-tool-host-loads-only-the-sdk',
      comment:
        'The tool host runs inside the sandbox, where only Node and the SDK are visible: at run time it imports ' +
        'node:* modules, @anthropic-ai/sdk and call-processes.ts only (types from protocol.ts are erased; ' +
        'call-processes.ts is bundled into it and imports node:* modules only).',
      severity: 'error',
      from: { path: '^src/sandbox/tool-host\\.ts$' },
      to: {
        pathNot: ['(^|/)node_modules/@anthropic-ai/sdk/', '^src/sandbox/call-processes\\.ts$'],
        dependencyTypesNot: ['core', 'type-only'],
      },
    },
    {
      name: 'sandbox-call-processes-node-only',
      comment: 'call-processes.ts is bundled into the tool host, which sees only Node and the SDK: it imports node:* modules only.',
      severity: 'error',
      from: { path: '^src/sandbox/call-processes\\.ts$' },
      to: { dependencyTypesNot: ['core'] },
    },
    {
      name: 'zod-v3-outside-the-test-kit',
      comment:
        "Option schemas import 'zod/v3': zod 4's own entry points load every one of its ~40 locales and its JSON " +
        'Schema tooling (about 2.3 MB more heap, 7 MiB more RSS before the first session). Only the test kit ' +
        "(src/testing/, never loaded by a worker) uses 'zod'.",
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/testing/' },
      to: { path: '(^|/)node_modules/zod/', pathNot: '(^|/)node_modules/zod/v3/' },
    },
    {
      name: 'internal-no-rooms',
      comment: 'src/internal/ (logger, abort, clock, ...) imports no other room of src/ (src/errors.ts aside).',
      severity: 'error',
      from: { path: '^src/internal/' },
      to: { path: '^src/', pathNot: ['^src/internal/', '^src/errors\\.ts$'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'], mainFields: ['module', 'main', 'types'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
