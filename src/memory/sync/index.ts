/**
 * sync/: one store's sync, and the loop over a session's stores. The mounted store (the one owner
 * of its folder, state and journal entry), a store's pass (folder check, scan beside the listing,
 * plan, execute), the executor, the scheduler, the session's final sync and flush, and the memory
 * options.
 *
 * Imports: rules/, disk/, remote/, journal/, src/api/, src/internal/, src/errors.ts. Checked by
 * .dependency-cruiser.cjs.
 */
export {};
