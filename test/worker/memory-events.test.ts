/**
 * Pins the forwarding of memory events to the worker: each is counted in the worker metrics
 * whether anyone listens or not, re-emitted with the item's ids when the worker has a listener
 * for it, and neither built nor emitted when it has none; detaching stops both.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { MemoryEventMap } from '../../src/worker/memory-port.js';
import { forwardMemoryEvents } from '../../src/worker/memory-events.js';
import { WorkerMetrics } from '../../src/worker/metrics.js';

const ids = { workId: 'work_1', sessionId: 'sesn_1' };
const downloaded = { storeId: 'memstore_1', path: 'a.md', sha: 'f'.repeat(64) };

describe('forwarding memory events', () => {
  it.each([
    { description: 'a listener on the worker', heard: true, emitted: [{ ...downloaded, ...ids }] },
    { description: 'no listener on the worker', heard: false, emitted: [] },
  ])('counts every event and re-emits it with the item ids only with $description', ({ heard, emitted }) => {
    const source = new EventEmitter<MemoryEventMap>();
    const metrics = new WorkerMetrics();
    const seen: object[] = [];
    const asked: string[] = [];
    const detach = forwardMemoryEvents(
      source,
      metrics,
      (_name: string, payload: object) => void seen.push(payload),
      ids,
      (name) => {
        asked.push(name);
        return heard;
      },
    );
    source.emit('downloaded', downloaded);
    source.emit('downloaded', downloaded);
    expect(metrics.snapshot(0).downloads).toBe(2);
    expect(seen).toEqual([...emitted, ...emitted]);
    expect(asked).toEqual(['downloaded', 'downloaded']);
    detach();
    source.emit('downloaded', downloaded);
    expect(metrics.snapshot(0).downloads).toBe(2);
    expect(seen).toHaveLength(emitted.length * 2);
  });
});
