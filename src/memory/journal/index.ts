/**
 * journal/: what survives a crash. One journal entry per mounted store (its sync state and owner),
 * when an entry is worth rewriting, and whether the process that wrote it still runs.
 *
 * Imports: rules/, disk/, remote/, src/internal/, src/errors.ts. Checked by .dependency-cruiser.cjs.
 */
export {};
