import type { EventEmitter } from 'node:events';
import { MEMORY_EVENT_NAMES, type ItemIds, type WorkerEmit } from './events.js';
import type { MemoryEventMap } from './memory-port.js';
import type { WorkerMetrics } from './metrics.js';

/**
 * Re-emit the memory events of `source` (a mounter or a sync loop) as worker events carrying the
 * item's ids, and count them in the worker metrics. An event nobody listens to on the worker
 * (`listens` says so) is counted and not copied: a mount emits one per file. Returns the function
 * that stops forwarding.
 */
export function forwardMemoryEvents(
  source: EventEmitter<MemoryEventMap>,
  metrics: WorkerMetrics,
  emit: WorkerEmit,
  ids: ItemIds,
  listens: (name: (typeof MEMORY_EVENT_NAMES)[number]) => boolean = () => true,
): () => void {
  const handlers: Array<[string, (p: object) => void]> = [];
  for (const name of MEMORY_EVENT_NAMES) {
    const handler = (payload: object): void => {
      countMemoryEvent(metrics, name, payload);
      if (listens(name)) (emit as (n: string, p: object) => void)(name, { ...payload, ...ids });
    };
    handlers.push([name, handler]);
    (source.on as (n: string, h: (p: object) => void) => void)(name, handler);
  }
  return () => {
    for (const [name, handler] of handlers) (source.off as (n: string, h: (p: object) => void) => void)(name, handler);
  };
}

function countMemoryEvent(metrics: WorkerMetrics, name: (typeof MEMORY_EVENT_NAMES)[number], payload: object): void {
  switch (name) {
    case 'uploaded':
      metrics.add('uploads');
      break;
    case 'downloaded':
      metrics.add('downloads');
      break;
    case 'conflict':
      metrics.add('conflicts');
      break;
    case 'deleted':
      metrics.add('deletes');
      break;
    case 'flushCutOff':
      metrics.add('flushCutOffs');
      break;
    case 'synced': {
      const p = payload as MemoryEventMap['synced'][0];
      // One count per pass over the session's stores, not per store.
      if (p.storeId === undefined) {
        metrics.add('syncs');
        metrics.add('syncDurationMsTotal', p.report.durationMs);
      }
      break;
    }
    case 'mounted':
    case 'mountProgress':
    case 'wouldDelete':
    case 'refused':
    case 'unmounted':
      break;
    default: {
      // Every forwarded event is either counted above or listed as not counted.
      const unlisted: never = name;
      void unlisted;
    }
  }
}
