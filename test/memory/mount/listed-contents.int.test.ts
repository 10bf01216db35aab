/**
 * Pins the contents a mount writes from its full listing pages, which it keeps as the pages' bytes
 * and decodes only as each file is written: every file holds exactly the content the store has,
 * whatever its escapes and characters; a page the cut cannot follow is parsed whole and still
 * written right; and no page buffer is left lent once the mount is done.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryMounter } from '../../../src/memory/index.js';
import { pagePoolStats } from '../../../src/memory/remote/page-bytes.js';
import { captureLogger, harness, openSession, type Harness } from '../int-helpers.js';

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.cleanup();
});

const LISTING = /^GET \/v1\/memory_stores\/[^/]+\/memories$/;

/** Contents with every escape JSON has, characters of every UTF-8 length, and large ones with many lines. */
function trickyContents(): Record<string, string> {
  const out: Record<string, string> = {
    '/plain.md': 'no escape at all',
    '/escapes.md': 'quote " backslash \\ slash / \b \f \n \r \t end',
    '/controls.md': '\u0000\u0001\u001f',
    '/unicode.md': 'é ✓ 𝄞 😀 — 日本語',
    '/empty.md': '',
    '/lines/big.md': Array.from({ length: 2500 }, (_, i) => `line ${i}: "quoted" \\ tab\t`).join('\n'),
    '/lines/wide.md': `${'日本'.repeat(12_000)}\n${'𝄞'.repeat(5_000)}`,
  };
  for (let i = 0; i < 45; i++) out[`/many/n-${i}.md`] = `note ${i}\n${'x'.repeat(i * 97)}\n"${i}"`;
  return out;
}

async function mountOne(memories: Record<string, string>): Promise<{ root: string; unmount: () => Promise<unknown> }> {
  const store = await h.emu.createMemoryStore({ name: 'Tricky', memories });
  const { client, session } = await openSession(h.emu, [{ memoryStoreId: store.id, mountPath: path.join(h.mountRoot, 'tricky') }]);
  const mounted = await new MemoryMounter({ client, logger: captureLogger().logger, stateDir: h.stateDir }).mount(session);
  return { root: mounted.stores[0]!.root, unmount: () => mounted.unmount() };
}

describe('contents written from the listing pages', () => {
  it('are byte for byte the store contents, and every page buffer goes back to the pool', async () => {
    const memories = trickyContents();
    const before = pagePoolStats().outstandingBytes;
    const m = await mountOne(memories);
    expect(pagePoolStats().outstandingBytes).toBe(before);
    for (const [p, content] of Object.entries(memories)) {
      expect(fs.readFileSync(path.join(m.root, p.slice(1))).equals(Buffer.from(content, 'utf8')), p).toBe(true);
    }
    await m.unmount();
  });

  it('are written right from a page the cut cannot follow (a content key spelled with escapes): the last member wins, as in JSON', async () => {
    const memories = { '/a.md': 'first', '/b.md': 'untouched' };
    h.emu.faults.add({
      route: LISTING,
      rewrite: (b) => JSON.stringify(b).replace('"content":"first"', '"content":"first","cont\\u0065nt":"the last one"'),
    });
    const m = await mountOne(memories);
    expect(fs.readFileSync(path.join(m.root, 'a.md'), 'utf8')).toBe('the last one');
    expect(fs.readFileSync(path.join(m.root, 'b.md'), 'utf8')).toBe('untouched');
    await m.unmount();
  });
});
