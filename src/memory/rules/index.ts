/**
 * rules/: the memory core's decisions, pure. The plan (the eight-case switch over baseline, local
 * and remote) and the sync state it advances; the rules around it (race verdicts, early uploads,
 * gone paths, refusals, case collisions); the marker and the folder and adoption verdicts; store
 * paths; the sync report; the plain types the other rooms and the worker share.
 *
 * Imports: only rules/ (plus src/errors.ts and src/internal/assert-never.ts). No node:* module, no
 * package, no file, clock or request: the rooms above observe, and a function here decides.
 * Checked by .dependency-cruiser.cjs.
 */
export {};
