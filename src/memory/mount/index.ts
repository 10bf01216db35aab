/**
 * mount/: a session's stores as folders. The mounter (checks, download, adoption of a dead
 * worker's folder), where a store may be mounted, and the leftovers of dead workers (the sweep at
 * start and `recover`).
 *
 * Imports: every room below (rules/, disk/, remote/, journal/, sync/), src/api/, src/internal/,
 * src/errors.ts. Only src/memory/index.ts, the barrel the rest of src/ imports, stands above it.
 * Checked by .dependency-cruiser.cjs.
 */
export {};
