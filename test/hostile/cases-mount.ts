/** Hostile cases around where a store is mounted, and how many stores a session attaches. */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { expect } from 'vitest';
import type { Ctx, HostileCase } from './hostile-kit.js';

/** A session with one store at `mountPath` (built from the ctx); the mount must be refused. */
function refusedAt(
  description: string,
  prepare: (ctx: Ctx) => Promise<string>,
  says: RegExp,
  extra: Parameters<Ctx['mountResources']>[1] = {},
): HostileCase {
  let mountPath = '';
  return {
    group: 'mount-path tricks',
    description,
    async run(ctx) {
      const storeId = await ctx.store();
      mountPath = await prepare(ctx);
      await ctx.armed();
      await ctx.mountResources([{ memoryStoreId: storeId, mountPath }], extra);
    },
    expects: { path: () => mountPath, says },
  };
}

export const mountCases: HostileCase[] = [
  refusedAt(
    'a folder already at the mount path',
    async (ctx) => {
      const p = path.join(ctx.mountRoot, 'taken');
      await fsp.mkdir(p);
      await fsp.writeFile(path.join(p, 'precious.md'), 'keep me');
      return p;
    },
    /already exists.*Remove it/,
  ),
  refusedAt(
    'a dangling symlink at the mount path',
    async (ctx) => {
      const p = path.join(ctx.mountRoot, 'dangling');
      await fsp.symlink(path.join(ctx.outside, 'nothing-here'), p);
      return p;
    },
    /already exists: a symlink is there.*Remove it/,
  ),
  refusedAt(
    'a symlink to an outside folder at the mount path',
    async (ctx) => {
      const p = path.join(ctx.mountRoot, 'linked');
      await fsp.symlink(ctx.outside, p);
      return p;
    },
    /already exists: a symlink is there.*Remove it/,
  ),
  refusedAt(
    'a symlinked parent folder',
    async (ctx) => {
      await fsp.symlink(ctx.outside, path.join(ctx.mountRoot, 'via'));
      return path.join(ctx.mountRoot, 'via', 'store');
    },
    /goes through the symlink .*Replace/,
  ),
  refusedAt('a ".." segment in the mount path', async (ctx) => `${ctx.mountRoot}/../outside/store`, /".." segment.*clean absolute/),
  refusedAt('a relative mount path', async () => 'relative/store', /not absolute/),
  refusedAt(
    'a parent that is a file',
    async (ctx) => {
      await fsp.writeFile(path.join(ctx.mountRoot, 'file-parent'), 'x');
      return path.join(ctx.mountRoot, 'file-parent', 'store');
    },
    /is not a folder/,
  ),
  refusedAt(
    'a missing parent (never created by the worker)',
    async (ctx) => path.join(ctx.mountRoot, 'missing', 'store'),
    /does not exist.*mkdir -p/,
  ),
  refusedAt(
    'a path outside the allowed mount roots',
    async (ctx) => path.join(ctx.outside, 'store'),
    /outside the allowed mount roots.*--allowed-mount-root/,
    {
      allowedMountRoots: ['/nonexistent-allowed-root'],
    },
  ),
  {
    group: 'stores and duplicate paths',
    description: 'two stores attached at one path',
    async run(ctx) {
      const a = await ctx.store();
      const b = await ctx.store();
      const p = path.join(ctx.mountRoot, 'shared');
      await ctx.armed();
      await ctx.mountResources([
        { memoryStoreId: a, mountPath: p },
        { memoryStoreId: b, mountPath: p },
      ]);
    },
    expects: { path: 'shared', says: /both attached at .*Attach one of them under another name/ },
  },
  {
    group: 'stores and duplicate paths',
    description: 'a store mounted inside another store',
    async run(ctx) {
      const a = await ctx.store();
      const b = await ctx.store();
      const p = path.join(ctx.mountRoot, 'outer');
      await ctx.armed();
      await ctx.mountResources([
        { memoryStoreId: a, mountPath: p },
        { memoryStoreId: b, mountPath: path.join(p, 'inner') },
      ]);
    },
    expects: { path: 'outer/inner', says: /inside the folder of store .*sibling mount paths/ },
  },
  {
    group: 'stores and duplicate paths',
    description: 'nine stores on one session',
    async run(ctx) {
      const ids: string[] = [];
      for (let i = 0; i < 9; i++) ids.push(await ctx.store({ [`/s${i}.md`]: `${i}` }));
      // The API refuses a ninth attachment; a wrong server lists one anyway.
      ctx.emu.faults.add({
        route: /^GET \/v1\/sessions\/[^/]+$/,
        rewrite: (b) => {
          const session = b as { resources: Array<Record<string, unknown>> };
          const last = session.resources.at(-1)!;
          return {
            ...session,
            resources: [...session.resources, { ...last, memory_store_id: ids[8], mount_path: path.join(ctx.mountRoot, 'nine-8') }],
          };
        },
      });
      await ctx.armed();
      const refused = await ctx
        .mountResources(ids.slice(0, 8).map((id, i) => ({ memoryStoreId: id, mountPath: path.join(ctx.mountRoot, `nine-${i}`) })))
        .catch((e: unknown) => e);
      expect(fs.readdirSync(ctx.mountRoot)).toEqual([]);
      throw refused;
    },
    expects: { path: 'nine-8', says: /at most 8 .*Detach 1/ },
  },
];
