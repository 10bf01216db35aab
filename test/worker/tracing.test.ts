// Pins the spans of a work item: one `anthropic.environment.work` span per item with the official
// worker's name and attributes, started from the client's tracer, current for the whole item so the
// SDK's request and tool spans are its children; below it the memory spans of this library: the
// mount (one child per store with memories and bytes), each sync pass (uploads, pulls, conflicts,
// deletes), and the finish with the final sync, the flush and the cut-off. A client whose spans are
// off gets none of ours either; handleItem() nests the item under the caller's current span.
import * as path from 'node:path';
import { trace } from '@opentelemetry/api';
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker as OfficialWorker } from '@anthropic-ai/sdk/lib/environments/worker';
import { sdkAtLeast } from '../sdk-version.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimNext, harness, type Harness } from './helpers.js';
import { allNodes, printTree, traceKit, type SpanNode, type TraceKit } from './trace-tree.js';

const SHOWN = [
  'anthropic.environment.work.id',
  'gen_ai.memory.store.id',
  'gen_ai.tool.name',
  'memory.stores',
  'memory.memories',
  'memory.bytes',
  'memory.sync.uploads',
  'memory.sync.pulls',
  'memory.sync.conflicts',
  'memory.sync.deletes',
  'memory.finish.clean',
  'memory.flush.cut_off',
];

function only(nodes: SpanNode[], name: string): SpanNode {
  const found = nodes.filter((n) => n.name === name);
  expect(
    found.map((n) => n.name),
    `exactly one ${name}`,
  ).toEqual([name]);
  return found[0]!;
}

function named(nodes: SpanNode[], name: string): SpanNode[] {
  return nodes.filter((n) => n.name === name);
}

describe('OpenTelemetry spans of a work item', () => {
  let h: Harness;
  let kit: TraceKit;
  beforeEach(async () => {
    kit = traceKit();
    h = await harness();
  });
  afterEach(async () => {
    await h.cleanup();
    await kit.close();
  });

  function tracedClient(
    openTelemetry: ConstructorParameters<typeof Anthropic>[0] extends infer O ? (O extends { openTelemetry?: infer T } ? T : never) : never,
  ) {
    return new Anthropic({ apiKey: 'sk-ant-api-operator-key', baseURL: h.emu.baseURL, logLevel: 'off', openTelemetry });
  }

  it('nests the SDK spans and the mount, sync and finish spans under one work span per item', async () => {
    const { emu } = h;
    const prefs = await emu.createMemoryStore({ name: 'User Preferences', memories: { '/tone.md': 'brief', '/notes/todo.md': 'milk' } });
    const handbook = await emu.createMemoryStore({ name: 'Team Handbook', memories: { '/rules.md': 'be kind' } });
    const prefsDir = path.join(h.mountRoot, 'user-preferences');
    const { sessionId, workId } = await emu.createSession({
      resources: [
        { memoryStoreId: prefs.id, access: 'read_write' },
        { memoryStoreId: handbook.id, access: 'read_only' },
      ],
      script: [
        { tool: 'write', input: { file_path: path.join(prefsDir, 'ideas/new.md'), content: 'fresh' } },
        { console: (e) => e.putMemory(prefs.id, '/tone.md', 'console tone') },
        // Past the 5 s interval: the next tool call runs a sync first (one upload, one pull).
        { sleepMs: 5_300 },
        { tool: 'read', input: { file_path: path.join(prefsDir, 'tone.md') } },
        { tool: 'write', input: { file_path: path.join(prefsDir, 'last.md'), content: 'saved at the end of the turn' } },
      ],
    });
    const worker = h.worker({ client: tracedClient({ tracerProvider: kit.provider }) });
    const running = worker.run();
    const done = await emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    await worker.close();
    await running;
    expect(done.toolResults.map((r) => r.text).join('\n')).toContain('console tone');

    const roots = kit.roots();
    const work = only(roots, 'anthropic.environment.work');
    console.log(`trace tree of session ${sessionId}:\n${printTree([work], SHOWN)}`);

    // The official worker's attributes, exactly.
    expect(work.attributes).toEqual({
      'gen_ai.provider.name': 'anthropic',
      'anthropic.environment.id': emu.environmentId,
      'anthropic.environment.work.id': workId,
      'anthropic.session.id': sessionId,
    });
    expect(work.span.status.code).toBe(1); // OK
    expect(work.span.instrumentationScope.name).toBe('com.anthropic.sdk.typescript');
    // Every span of the item is in the work span's trace; polls stay outside it.
    const inItem = allNodes(work);
    expect(new Set(inItem.map((n) => n.span.spanContext().traceId))).toEqual(new Set([work.span.spanContext().traceId]));
    expect(inItem.some((n) => n.name === 'anthropic.environments.work.poll')).toBe(false);

    // The SDK's own spans are children of the work span.
    const top = work.children;
    // The worker reads the session once; from SDK 1.16 the runner reads it too, under the same span.
    expect(named(top, 'anthropic.sessions.retrieve')).toHaveLength(sdkAtLeast('1.16.0') ? 2 : 1);
    expect(named(top, 'anthropic.environments.work.heartbeat').length).toBeGreaterThan(0);
    expect(named(top, 'anthropic.environments.work.stop')).toHaveLength(1);
    const toolSpans = inItem.filter((n) => n.attributes['gen_ai.tool.name'] !== undefined);
    expect(toolSpans.map((n) => n.attributes['gen_ai.tool.name'])).toEqual(['write', 'read', 'write']);

    // Mount: one span, one child per store with its memories and bytes, the SDK listings below it.
    const mount = only(top, 'memory.mount');
    expect(mount.attributes).toMatchObject({
      'memory.stores': 2,
      'memory.memories': 3,
      'memory.bytes': 'brief'.length + 'milk'.length + 'be kind'.length,
    });
    const stores = named(mount.children, 'memory.mount.store');
    expect(
      stores.map((s) => [s.attributes['gen_ai.memory.store.id'], s.attributes['memory.memories'], s.attributes['memory.bytes']]).sort(),
    ).toEqual(
      [
        [prefs.id, 2, 'brief'.length + 'milk'.length],
        [handbook.id, 1, 'be kind'.length],
      ].sort(),
    );
    // Each store's listing nests under that store's span.
    for (const store of stores) {
      const listings = store.children.filter((c) => c.name === 'anthropic.memory_stores.memories.list');
      expect(listings.length).toBeGreaterThan(0);
      expect(listings.every((l) => l.attributes['gen_ai.memory.store.id'] === store.attributes['gen_ai.memory.store.id'])).toBe(true);
    }

    // The sync before the read: the agent's new file up, the Console edit down.
    const syncs = named(top, 'memory.sync');
    expect(syncs.length).toBeGreaterThan(0);
    expect(syncs[0]!.attributes).toMatchObject({
      'memory.sync.phase': 'sync',
      'memory.sync.uploads': 1,
      'memory.sync.pulls': 1,
      'memory.sync.conflicts': 0,
      'memory.sync.deletes': 0,
    });
    // Its requests nest under it, not under the tool call whose timer started it.
    expect(syncs[0]!.children.map((c) => c.name).sort()).toEqual([
      'anthropic.memory_stores.memories.create',
      'anthropic.memory_stores.memories.list',
      'anthropic.memory_stores.memories.list',
      'anthropic.memory_stores.memories.retrieve',
    ]);
    for (const tool of toolSpans) expect(allNodes(tool).filter((n) => n.name.startsWith('anthropic.memory_stores.'))).toEqual([]);

    // Finish: the flush has nothing left, no cut-off.
    const finish = only(top, 'memory.finish');
    expect(finish.attributes).toMatchObject({
      'memory.finish.clean': true,
      'memory.flush.cut_off': false,
      'memory.flush.pending_uploads': 0,
      'memory.folders.removed': 2,
    });
    // The last write goes up once: with the push when the session goes idle after its turn, or with
    // the final sync when the session terminated first (the script terminates right after the idle).
    const finalSync = only(finish.children, 'memory.final_sync');
    const idlePushes = named(top, 'memory.flush');
    expect(idlePushes.length).toBeLessThanOrEqual(1);
    const savedBy = [finalSync, ...idlePushes].filter((s) => s.attributes['memory.sync.uploads'] === 1);
    expect(savedBy).toHaveLength(1);
    expect(finalSync.attributes).toMatchObject({ 'memory.sync.phase': 'final' });
    expect(only(finish.children, 'memory.flush').attributes).toMatchObject({ 'memory.sync.phase': 'flush', 'memory.sync.uploads': 0 });
    // The upload's request nests under the span that made it.
    expect(allNodes(savedBy[0]!).some((n) => n.name === 'anthropic.memory_stores.memories.create')).toBe(true);
    // Our spans carry this library's scope.
    expect(mount.span.instrumentationScope.name).toBe('managed-agents-worker');
  }, 60_000);

  it('names the work span and its attributes as the official worker does', async () => {
    const { sessionId: first } = await h.emu.createSession({ script: [{ tool: 'bash', input: { command: 'true' } }] });
    const official = new OfficialWorker({
      client: tracedClient({ tracerProvider: kit.provider }),
      environmentId: h.emu.environmentId,
      environmentKey: h.emu.environmentKey,
      workdir: h.workdir,
    });
    const stop = new AbortController();
    const officialRun = official.run(stop.signal).catch(() => undefined);
    await h.emu.waitForSession(first, { timeoutMs: 30_000 });
    // The session ends before the worker has stopped its item: stopping the worker now would cut
    // its work span short (no status). Wait for that span to end first.
    const workOf = (id: string) =>
      kit.roots().find((r) => r.name === 'anthropic.environment.work' && r.attributes['anthropic.session.id'] === id);
    await expect.poll(() => workOf(first), { timeout: 10_000 }).toBeDefined();
    stop.abort();
    await officialRun;
    const { sessionId: second } = await h.emu.createSession({ script: [{ tool: 'bash', input: { command: 'true' } }] });
    const worker = h.worker({ client: tracedClient({ tracerProvider: kit.provider }) });
    const running = worker.run();
    await h.emu.waitForSession(second, { timeoutMs: 30_000 });
    await worker.close();
    await running;

    const theirs = workOf(first);
    const ours = workOf(second);
    expect(theirs).toBeDefined();
    expect(ours).toBeDefined();
    expect(Object.keys(ours!.attributes).sort()).toEqual(Object.keys(theirs!.attributes).sort());
    expect(ours!.span.kind).toBe(theirs!.span.kind);
    expect(ours!.span.instrumentationScope).toEqual(theirs!.span.instrumentationScope);
    expect(ours!.span.status.code).toBe(theirs!.span.status.code);
    // Both put the tool span under the work span.
    for (const w of [theirs!, ours!]) expect(allNodes(w).some((n) => n.attributes['gen_ai.tool.name'] === 'bash')).toBe(true);
  }, 60_000);

  it('marks the finish span cut off when the final sync outlives its bound', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
    const dir = path.join(h.mountRoot, 'notes');
    const { sessionId } = await h.emu.createSession({
      resources: [{ memoryStoreId: store.id, access: 'read_write' }],
      script: [
        { tool: 'write', input: { file_path: path.join(dir, 'late.md'), content: 'never reaches the store' } },
        // Every upload from now on hangs: the final sync cannot finish within finalFlushMs.
        { console: (e) => e.faults.add({ method: 'POST', route: /\/memories$/, hang: true }) },
      ],
    });
    const worker = h.worker({ client: tracedClient({ tracerProvider: kit.provider }), finalFlushMs: 800 });
    const running = worker.run();
    const ended = new Promise<void>((resolve) => worker.on('sessionEnded', () => resolve()));
    await h.emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    await ended;
    await worker.close();
    await running;

    const work = only(kit.roots(), 'anthropic.environment.work');
    const finish = only(work.children, 'memory.finish');
    expect(finish.attributes).toMatchObject({
      'memory.finish.clean': true,
      'memory.flush.cut_off': true,
      'memory.flush.pending_uploads': 1,
    });
    expect(finish.span.status.code).toBe(2); // ERROR
    expect(finish.attributes['error.type']).toBe('flush_cut_off');
    expect(finish.span.events.map((e) => [e.name, e.attributes?.['memory.sync.phase']])).toEqual([['memory.flush.cut_off', 'final']]);
    expect(only(finish.children, 'memory.final_sync').attributes['memory.sync.uploads']).toBe(0);
  }, 30_000);

  it('emits no span of its own when the client has its spans turned off', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
    const { sessionId } = await h.emu.createSession({ resources: [{ memoryStoreId: store.id, access: 'read_write' }], script: [] });
    const worker = h.worker({ client: tracedClient({ tracerProvider: kit.provider, traces: false }) });
    const running = worker.run();
    await h.emu.waitForSession(sessionId, { timeoutMs: 30_000 });
    await worker.close();
    await running;
    expect(kit.exporter.getFinishedSpans().map((s) => s.name)).toEqual([]);
  }, 30_000);

  it('puts the item of handleItem() under the caller’s current span and marks a failed item', async () => {
    const store = await h.emu.createMemoryStore({ name: 'Notes', memories: { '/a.md': 'a' } });
    // No secret with the item: a session with stores then fails (memory needs the sessions token).
    const { sessionId } = await h.emu.createSession({ resources: [{ memoryStoreId: store.id, access: 'read_write' }], script: [] });
    const item = await claimNext(h);
    const worker = h.worker({ client: tracedClient({ tracerProvider: kit.provider }) });
    const tracer = kit.provider.getTracer('webhook-app');
    await tracer.startActiveSpan('POST /webhook', async (request) => {
      await worker
        .handleItem({ workId: item.workId, environmentId: item.environmentId, sessionId, environmentKey: h.emu.environmentKey })
        .catch(() => undefined);
      request.end();
    });
    const root = only(kit.roots(), 'POST /webhook');
    const work = only(root.children, 'anthropic.environment.work');
    expect(work.attributes['anthropic.session.id']).toBe(sessionId);
    expect(work.span.status.code).toBe(2); // ERROR
    expect(work.attributes['error.type']).toBe('MAW_MEMORY_UNAVAILABLE');
    // The caller's context is its own again once the item is done.
    expect(trace.getActiveSpan()).toBeUndefined();
  }, 30_000);
});
