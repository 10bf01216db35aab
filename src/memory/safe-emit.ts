import type { EventEmitter } from 'node:events';
import type { Logger } from '../internal/logger.js';
import type { MemoryEventMap } from './types.js';

/**
 * Emit an event so that a throwing listener cannot break the sync: each listener is called on its
 * own, and an exception is logged (with the event name) instead of propagating.
 */
export function safeEmit<K extends keyof MemoryEventMap>(
  emitter: EventEmitter<MemoryEventMap>,
  log: Logger,
  event: K,
  ...args: MemoryEventMap[K]
): void {
  const listeners = (emitter as unknown as EventEmitter).rawListeners(event) as Array<(...a: unknown[]) => unknown>;
  for (const listener of listeners) {
    try {
      listener.apply(emitter, args);
    } catch (err) {
      log.warn({ err, event }, 'a memory event listener threw; ignored');
    }
  }
}
