/**
 * The code a session needs: the item runner (with the agent toolset and the sandbox's tool host
 * client) and the memory core. Loaded at the first work item rather than with the worker, so a
 * worker waiting for work holds only its options, logger, poller and journal sweep; every later
 * item reuses the loaded modules (the module system loads each once per process).
 */
import type { runItem } from './item-runner.js';
import type { MemoryPort } from './memory-port.js';

export interface SessionCode {
  runItem: typeof runItem;
  /** The caller's memory port, or the default one bound to `src/memory/`. */
  memory: MemoryPort;
}

/** Load the session code; `memory` (the worker's internal port, in tests) skips the memory core. */
export async function loadSessionCode(memory: MemoryPort | undefined): Promise<SessionCode> {
  const [runner, port] = await Promise.all([
    import('./item-runner.js'),
    memory === undefined ? import('./default-memory-port.js').then((m) => m.defaultMemoryPort) : memory,
  ]);
  return { runItem: runner.runItem, memory: port };
}
