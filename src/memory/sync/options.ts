import { z } from 'zod/v3';
import { ConfigError } from '../../errors.js';
import { MEMORY_DEFAULTS } from '../../internal/defaults.js';

/**
 * The memory options, defined once: the worker options, the CLI flags and the SyncLoop all accept
 * exactly these ranges, so a value refused in one place is refused everywhere, with the same words.
 */

/** Default memory sync interval (`memorySyncIntervalMs`), in milliseconds. */
export const MEMORY_SYNC_INTERVAL_DEFAULT_MS = MEMORY_DEFAULTS.syncIntervalMs;
/** Least `memorySyncIntervalMs` accepted, in milliseconds. */
export const MEMORY_SYNC_INTERVAL_MIN_MS = MEMORY_DEFAULTS.syncIntervalMinMs;
/** Default and bounds of the end-of-session final sync plus flush. */
export const FINAL_FLUSH_DEFAULT_MS = MEMORY_DEFAULTS.finalFlushMs;
export const FINAL_FLUSH_MIN_MS = MEMORY_DEFAULTS.finalFlushMinMs;
export const FINAL_FLUSH_MAX_MS = MEMORY_DEFAULTS.finalFlushMaxMs;
/** Default and bounds of the time a file must be gone before its memory is deleted. */
export const MEMORY_DELETE_AFTER_DEFAULT_MS = MEMORY_DEFAULTS.deleteAfterMs;
export const MEMORY_DELETE_AFTER_MAX_MS = MEMORY_DEFAULTS.deleteAfterMaxMs;
/** Default and most bytes of the content cache in the state folder. */
export const MEMORY_CONTENT_CACHE_DEFAULT_BYTES = MEMORY_DEFAULTS.contentCacheBytes;
export const MEMORY_CONTENT_CACHE_MAX_BYTES = MEMORY_DEFAULTS.contentCacheMaxBytes;

/** Default and bounds of the memory content one mount holds at once. */
export const MEMORY_BUFFER_DEFAULT_BYTES = MEMORY_DEFAULTS.bufferBytes;
export const MEMORY_BUFFER_MIN_BYTES = MEMORY_DEFAULTS.bufferMinBytes;
export const MEMORY_BUFFER_MAX_BYTES = MEMORY_DEFAULTS.bufferMaxBytes;

/** zod fields of the memory options, to spread into an options schema. */
export const memoryOptionFields = {
  /** Least ms between two syncs; `null` turns memory off. */
  memorySyncIntervalMs: z.number().int().min(MEMORY_SYNC_INTERVAL_MIN_MS).nullable().optional(),
  memorySyncDeletions: z.enum(['enabled', 'log_only', 'disabled']).optional(),
  memoryDeleteAfterMs: z.number().int().min(0).max(MEMORY_DELETE_AFTER_MAX_MS).optional(),
  finalFlushMs: z.number().int().min(FINAL_FLUSH_MIN_MS).max(FINAL_FLUSH_MAX_MS).optional(),
  stateDir: z.string().min(1).optional(),
  memoryBufferBytes: z.number().int().min(MEMORY_BUFFER_MIN_BYTES).max(MEMORY_BUFFER_MAX_BYTES).optional(),
  /**
   * Bytes of memory contents kept in `<stateDir>/content-cache/` so a later mount of an unchanged
   * store copies them instead of downloading them (least recently used removed past it). Default
   * 536 870 912 (512 MiB); `0` turns the cache off.
   */
  memoryCacheBytes: z.number().int().min(0).max(MEMORY_CONTENT_CACHE_MAX_BYTES).optional(),
};

/** What each memory option accepts, as error messages say it. */
export const MEMORY_OPTION_EXPECTED: Record<keyof typeof memoryOptionFields, string> = {
  memorySyncIntervalMs: `a number >= ${MEMORY_SYNC_INTERVAL_MIN_MS} or null`,
  memorySyncDeletions: '"enabled", "log_only" or "disabled"',
  memoryDeleteAfterMs: `an integer number of milliseconds from 0 to ${MEMORY_DELETE_AFTER_MAX_MS}`,
  // 0 would cut off every final sync before it starts: the session's last edits would never be saved.
  finalFlushMs: `an integer number of milliseconds from ${FINAL_FLUSH_MIN_MS} to ${FINAL_FLUSH_MAX_MS} (0 would cut off every final sync)`,
  stateDir: 'a non-empty directory path',
  // Below 1 MiB a page of the largest memories could not be held at all.
  memoryBufferBytes: `an integer number of bytes from ${MEMORY_BUFFER_MIN_BYTES} to ${MEMORY_BUFFER_MAX_BYTES}`,
  memoryCacheBytes: `an integer number of bytes from 0 (no cache) to ${MEMORY_CONTENT_CACHE_MAX_BYTES}`,
};

const memoryOptionsSchema = z.object(memoryOptionFields);
export type MemoryOptionsInput = z.input<typeof memoryOptionsSchema>;

/**
 * Check memory options given under their worker names; throws a {@link ConfigError} with one line
 * per problem (`name: expected …, got …`).
 */
export function checkMemoryOptions(input: MemoryOptionsInput, where = 'memory options'): void {
  const parsed = memoryOptionsSchema.safeParse(input);
  if (parsed.success) return;
  const lines = [...new Set(parsed.error.issues.map((i) => String(i.path[0])))].map((key) => {
    const value = (input as Record<string, unknown>)[key];
    return `${key}: expected ${MEMORY_OPTION_EXPECTED[key as keyof typeof memoryOptionFields] ?? 'a valid value'}, got ${String(value)}`;
  });
  throw new ConfigError(`invalid ${where}:\n  ${lines.join('\n  ')}`, lines);
}

/** Content fetches and file writes in flight per store (SyncLoop) and per mount (MemoryMounter), by default. */
export const MEMORY_CONCURRENCY_DEFAULT = 16;

/** The fan-out a SyncLoop or MemoryMounter runs with: its `concurrency` option rounded down, at least 1. */
export function memoryConcurrency(concurrency: number | undefined): number {
  return Math.max(1, Math.floor(concurrency ?? MEMORY_CONCURRENCY_DEFAULT));
}
