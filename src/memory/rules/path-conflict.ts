/**
 * Start of the refusal reason of an upload refused because another memory's path overlaps it (a
 * local file where the store has a folder, or a local folder where the store has a file). Unlike
 * other refusals it does not depend on the file's content only: once the conflicting memory is gone
 * from the store (typically deleted by a later sync, when the agent replaced a file by a folder),
 * the path is retried.
 */
export const PATH_CONFLICT_REASON_PREFIX = 'path conflict: the store holds an overlapping memory at ';

/** True for a refusal reason recorded for a path conflict (see {@link PATH_CONFLICT_REASON_PREFIX}). */
export function isPathConflictReason(reason: string): boolean {
  return reason.startsWith(PATH_CONFLICT_REASON_PREFIX);
}
