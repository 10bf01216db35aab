/**
 * remote/: the store side. Listings and the memory requests of one store (bounded bodies, page
 * budgets, write failures classified for the planner), and the contents a warm mount or a pull
 * fetches beside the content cache.
 *
 * Imports: rules/, disk/, src/api/, src/internal/, src/errors.ts. Checked by
 * .dependency-cruiser.cjs.
 */
export {};
