// A worker killed with -9 leaves its sessions' egress folders in the temporary folder; the next
// worker removes those no proxy answers on, and keeps a live one and a young one.
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { pruneStaleEgressDirs } from '../../../src/sandbox/network/stale-egress.js';

let parent: string;
afterEach(async () => {
  await fsp.rm(parent, { recursive: true, force: true });
});

it('removes the stale egress folders and keeps a live and a young one', async () => {
  parent = await fsp.mkdtemp(path.join(os.tmpdir(), 'maw-prune-'));
  const mk = async (name: string): Promise<string> => {
    const dir = path.join(parent, name);
    await fsp.mkdir(dir);
    return dir;
  };
  // What a killed proxy leaves: its socket's file, which nothing answers on any more.
  const dead = await mk('maw-egress-dead');
  await fsp.writeFile(path.join(dead, 'proxy.sock'), '');
  const live = await mk('maw-egress-live');
  const liveServer = net.createServer((s) => s.destroy());
  await new Promise<void>((r) => liveServer.listen(path.join(live, 'proxy.sock'), r));
  const empty = await mk('maw-egress-empty');
  await mk('maw-egress-young');
  const other = await mk('not-egress');
  const old = new Date(Date.now() - 10 * 60_000);
  for (const d of [dead, live, empty, other]) await fsp.utimes(d, old, old);
  try {
    const removed = await pruneStaleEgressDirs({ parent });
    expect(removed.sort()).toEqual([dead, empty].sort());
    const left = (await fsp.readdir(parent)).sort();
    expect(left).toEqual(['maw-egress-live', 'maw-egress-young', 'not-egress']);
  } finally {
    liveServer.close();
  }
});
