/**
 * The hostile-input suite: one table of cases where the server answers wrongly or the agent plants
 * things on disk (bad server paths, symlinks, FIFOs, devices, sockets, huge and binary files,
 * marker tampering, mount-path tricks, nine stores and duplicate paths, permission changes, deep
 * trees, endless or malformed listings, webhook abuse). Every case asserts the same four things: nothing outside
 * the mount parent and the state folder changed, no unhandled rejection (the process keeps
 * serving), no credential in any log line or event, and a warning or the error that names the path
 * (or store) and says what happens or what to do. A refusal is a typed WorkerError.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerError } from '../../src/errors.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';
import { snapshotTree } from '../memory/fs-snapshot.js';
import { agentCases } from './cases-agent.js';
import { mountCases } from './cases-mount.js';
import { serverCases } from './cases-server.js';
import { webhookCases } from './cases-webhook.js';
import { newCtx, type HostileCase } from './hostile-kit.js';

const cases: HostileCase[] = [...serverCases, ...agentCases, ...mountCases, ...webhookCases];

let emu: Emulator;
const rejections: unknown[] = [];
const onRejection = (reason: unknown): void => void rejections.push(reason);

beforeAll(async () => {
  emu = await startEmulator({ mountRoot: '/nonexistent-hostile-root' });
  process.on('unhandledRejection', onRejection);
});
afterAll(async () => {
  process.off('unhandledRejection', onRejection);
  await emu.close();
  const byGroup = new Map<string, number>();
  for (const c of cases) byGroup.set(c.group, (byGroup.get(c.group) ?? 0) + 1);
  console.log(`hostile cases by group: ${[...byGroup].map(([g, n]) => `${g} ${n}`).join(', ')}; total ${cases.length}`);
});

describe(`hostile inputs (${cases.length} cases)`, () => {
  it.each(cases.map((c) => [`${c.group}: ${c.description}`, c] as const))(
    '%s',
    async (_name, c) => {
      const { ctx, before, dispose } = await newCtx(emu);
      const rejectionsBefore = rejections.length;
      let error: unknown;
      try {
        try {
          await c.run(ctx);
        } catch (e) {
          error = e;
        }
        if (error !== undefined && !(error instanceof WorkerError)) throw error;
        await new Promise((r) => setImmediate(r));

        // Nothing outside the mount parent and the state folder changed.
        const snapshot = before();
        expect(snapshot, 'the case never armed').toBeDefined();
        expect(await snapshotTree(ctx.tmp, [ctx.mountRoot, ctx.stateDir])).toEqual(snapshot);

        // The process did not crash: no unhandled rejection.
        expect(rejections.slice(rejectionsBefore)).toEqual([]);

        // No credential in any log line or event.
        const logged =
          JSON.stringify(ctx.log.lines) +
          JSON.stringify(ctx.events, (_k, v: unknown) => (v instanceof Error ? v.message : v)) +
          ctx.answers.join('\n');
        for (const secret of ctx.secrets) expect(logged.includes(secret), 'a credential was logged').toBe(false);

        // A warning or the error names the path and says what happens or what to do.
        const named = typeof c.expects.path === 'function' ? c.expects.path(ctx) : c.expects.path;
        const haystacks = ctx.log.lines.filter((l) => c.group === 'permission changes' || l.level >= 40).map((l) => JSON.stringify(l));
        if (error instanceof Error) haystacks.push(error.message, JSON.stringify(error.message));
        haystacks.push(...ctx.answers);
        const hit = haystacks.find((h) => h.includes(named) && c.expects.says.test(h));
        expect(hit, `no warning or error names ${named} and says ${c.expects.says}:\n${haystacks.join('\n')}`).toBeDefined();
      } finally {
        await dispose();
      }
    },
    20_000,
  );
});
