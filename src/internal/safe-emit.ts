import type { EventEmitter } from 'node:events';
import type { Logger } from './logger.js';

/**
 * Emit an event so that a throwing listener cannot break the caller nor starve the listeners after
 * it: each listener runs in turn, and a throw is logged (with the event name) and dropped. Events
 * are for observing; nothing the library does depends on a listener.
 */
export function safeEmit<T extends Record<keyof T, unknown[]>, K extends keyof T & string>(
  emitter: EventEmitter<T>,
  log: Logger,
  event: K,
  ...args: T[K]
): void {
  const listeners = (emitter as unknown as EventEmitter).rawListeners(event) as Array<(...a: unknown[]) => unknown>;
  for (const listener of listeners) {
    try {
      listener.apply(emitter, args);
    } catch (err) {
      log.error({ err, event }, 'an event listener threw; ignored');
    }
  }
}
