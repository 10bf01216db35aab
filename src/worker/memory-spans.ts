import { SpanKind, SpanStatusCode, context, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import type { EventEmitter } from 'node:events';
import type { SyncPhase } from '../memory/rules/plan.js';
import type { MemoryEventMap, SyncReport } from '../memory/rules/types.js';
import type { FinishReport } from './memory-port.js';
import type { StoreWrapper } from '../memory/mount/mounter.js';
import { guardTracing, setErrorStatus, withSpan, type WorkTracers } from './tracing.js';

/** Names of the memory spans, children of the work span. */
export const MEMORY_SPAN_NAMES = {
  mount: 'memory.mount',
  mountStore: 'memory.mount.store',
  sync: 'memory.sync',
  finish: 'memory.finish',
  finalSync: 'memory.final_sync',
  flush: 'memory.flush',
} as const;

/**
 * The memory spans of one work item, all below its work span:
 * - `memory.mount` covers the mount, with one `memory.mount.store` child per store saying how many
 *   memories and bytes it brought;
 * - `memory.sync` for each sync pass of the session, with what it uploaded, pulled, deleted and
 *   the conflicts it settled;
 * - `memory.finish` covers the end of the session, with a
 *   `memory.final_sync` child on a clean end, a `memory.flush` child, and whether the bound cut
 *   them off.
 * Each span is current while its step runs, so the SDK's request spans nest under it. The counts
 * come from the step's result or from the `mounted` events of the mounter. Without a tracer every
 * method just runs what it is given.
 */
export class MemorySpans {
  readonly #tracer: Tracer | undefined;
  readonly #parent: Span | undefined;
  #mount: { span: Span; stores: Map<string, Span>; totals: { memories: number; bytes: number } } | undefined;
  #finish: Span | undefined;

  constructor(tracers: WorkTracers | undefined, workSpan: Span | undefined) {
    this.#tracer = workSpan ? tracers?.own : undefined;
    this.#parent = workSpan;
  }

  /**
   * Runs the mount of `storeCount` stores inside `memory.mount`; `mount` gets the wrapper that runs
   * each store's mount inside its own `memory.mount.store` span.
   */
  async mount<T>(storeCount: number, mount: (wrapStore: StoreWrapper) => Promise<T>): Promise<T> {
    const span = this.#start(MEMORY_SPAN_NAMES.mount, { 'memory.stores': storeCount });
    if (!span) return mount((_storeId, run) => run());
    const totals = { memories: 0, bytes: 0 };
    this.#mount = { span, stores: new Map(), totals };
    const wrapStore: StoreWrapper = (storeId, run) => this.#mountStore(span, storeId, run);
    try {
      const result = await withSpan(span, () => mount(wrapStore));
      guardTracing(() => {
        span.setAttributes({ 'memory.memories': totals.memories, 'memory.bytes': totals.bytes });
        span.setStatus({ code: SpanStatusCode.OK });
      });
      return result;
    } catch (e) {
      guardTracing(() => setErrorStatus(span, e));
      throw e;
    } finally {
      this.#mount = undefined;
      guardTracing(() => span.end());
    }
  }

  async #mountStore<T>(parent: Span, storeId: string, run: () => Promise<T>): Promise<T> {
    const span = this.#start(MEMORY_SPAN_NAMES.mountStore, { 'gen_ai.memory.store.id': storeId }, parent);
    if (!span) return run();
    this.#mount?.stores.set(storeId, span);
    try {
      const result = await withSpan(span, run);
      guardTracing(() => span.setStatus({ code: SpanStatusCode.OK }));
      return result;
    } catch (e) {
      guardTracing(() => setErrorStatus(span, e));
      throw e;
    } finally {
      guardTracing(() => span.end());
    }
  }

  /** Runs the end of the session (final sync, flush, unmount) inside `memory.finish`. */
  async finish(clean: boolean, run: () => Promise<FinishReport | undefined>): Promise<FinishReport | undefined> {
    const span = this.#start(MEMORY_SPAN_NAMES.finish, { 'memory.finish.clean': clean });
    if (!span) return run();
    this.#finish = span;
    try {
      const report = await withSpan(span, run);
      guardTracing(() => {
        if (report === undefined) {
          // The memory core did not return within its bound: the worker moved on without it.
          span.setAttribute('memory.flush.cut_off', true);
          setErrorStatus(span, { code: 'finish_overran' });
          return;
        }
        span.setAttributes({
          'memory.flush.cut_off': report.cutOff,
          'memory.flush.pending_uploads': report.pendingUploads,
          'memory.folders.removed': report.removed.length,
          'memory.folders.kept': report.kept.length,
        });
        if (report.pendingUploads > 0) setErrorStatus(span, { code: report.cutOff ? 'flush_cut_off' : 'uploads_pending' });
        else span.setStatus({ code: SpanStatusCode.OK });
      });
      return report;
    } finally {
      this.#finish = undefined;
      guardTracing(() => span.end());
    }
  }

  /**
   * Runs one sync pass inside its span: `memory.sync` during the session, `memory.final_sync` and
   * `memory.flush` below `memory.finish`. The span is current while the pass runs, so its requests
   * nest under it whatever started the pass (a tool call, the trailing timer, the finish).
   */
  async sync(phase: SyncPhase, run: () => Promise<SyncReport>): Promise<SyncReport> {
    const name = phase === 'final' ? MEMORY_SPAN_NAMES.finalSync : phase === 'flush' ? MEMORY_SPAN_NAMES.flush : MEMORY_SPAN_NAMES.sync;
    const span = this.#start(name, { 'memory.sync.phase': phase }, phase === 'sync' ? this.#parent : (this.#finish ?? this.#parent));
    if (!span) return run();
    try {
      const report = await withSpan(span, run);
      guardTracing(() => {
        span.setAttributes(syncAttributes(phase, report));
        if (report.errors > 0) setErrorStatus(span, { code: 'sync_errors' });
        else span.setStatus({ code: SpanStatusCode.OK });
      });
      return report;
    } catch (e) {
      guardTracing(() => setErrorStatus(span, e));
      throw e;
    } finally {
      guardTracing(() => span.end());
    }
  }

  /** Records spans from the memory events of `source` (a mounter or a sync loop); returns the detacher. */
  observe(source: EventEmitter<MemoryEventMap>): () => void {
    if (!this.#tracer) return () => {};
    const onMounted = (e: MemoryEventMap['mounted'][0]): void => this.#onMounted(e);
    const onCutOff = (e: MemoryEventMap['flushCutOff'][0]): void => this.#onCutOff(e);
    source.on('mounted', onMounted);
    source.on('flushCutOff', onCutOff);
    return () => {
      source.off('mounted', onMounted);
      source.off('flushCutOff', onCutOff);
    };
  }

  #start(name: string, attributes: Attributes, parent = this.#parent): Span | undefined {
    const tracer = this.#tracer;
    if (!tracer || !parent) return undefined;
    return guardTracing(() => tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, trace.setSpan(context.active(), parent)));
  }

  /** The store's mount is done: its counts go on its span and into the totals. */
  #onMounted(e: MemoryEventMap['mounted'][0]): void {
    const mount = this.#mount;
    if (!mount) return;
    mount.totals.memories += e.memories;
    mount.totals.bytes += e.bytes;
    const span = mount.stores.get(e.storeId);
    if (span)
      guardTracing(() => span.setAttributes({ 'memory.mount_path': e.root, 'memory.memories': e.memories, 'memory.bytes': e.bytes }));
  }

  #onCutOff(e: MemoryEventMap['flushCutOff'][0]): void {
    const span = this.#finish;
    if (!span) return;
    guardTracing(() =>
      span.addEvent('memory.flush.cut_off', {
        'memory.sync.phase': e.phase,
        'memory.flush.bound_ms': e.boundMs,
        'memory.flush.pending_uploads': e.pendingUploads,
      }),
    );
  }
}

/** The attributes of a sync span: what the pass did, by kind. */
export function syncAttributes(phase: SyncPhase, r: SyncReport): Attributes {
  return {
    'memory.sync.phase': phase,
    'memory.sync.uploads': r.uploads,
    'memory.sync.pulls': r.downloads,
    'memory.sync.conflicts': r.conflicts,
    'memory.sync.deletes': r.deletes,
    'memory.sync.local_deletes': r.localDeletes,
    'memory.sync.would_deletes': r.wouldDeletes,
    'memory.sync.refusals': r.refusals,
    'memory.sync.errors': r.errors,
    'memory.sync.skipped_stores': r.skippedStores,
  };
}
