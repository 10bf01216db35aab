// Pins the page buffer pool: a page's buffer goes back to the pool only once the page and every
// content cut from it are done, a content is read once, and a content read after its buffer was
// lent for another page throws instead of giving that page's bytes.
import { describe, expect, it } from 'vitest';
import { PageBytes, pagePoolStats } from '../../../src/memory/remote/page-bytes.js';

/** A page holding `text`, and the content token at the first occurrence of `token` in it. */
function pageWith(text: string, token: string): { page: PageBytes; start: number; end: number } {
  const bytes = Buffer.from(text, 'utf8');
  const page = PageBytes.lend(bytes.length);
  bytes.copy(page.bytes);
  const start = bytes.indexOf(Buffer.from(token, 'utf8'));
  return { page, start, end: start + Buffer.byteLength(token, 'utf8') };
}

describe('PageBytes and PageContent', () => {
  it('gives a content its bytes, decoded once in place, and a size that agrees with them', () => {
    const { page, start, end } = pageWith('{"content":"a\\nb é"}', '"a\\nb é"');
    const c = page.content(start, end);
    expect(c.rawBytes).toBe(Buffer.byteLength('a\\nb é'));
    expect(c.byteLength()).toBe(Buffer.byteLength('a\nb é'));
    expect(c.withBytes((b) => b.toString('utf8'))).toBe('a\nb é');
    page.done();
  });

  it('gives an unescaped content the page own bytes, and returns the buffer only when the page and its contents are done', () => {
    const before = pagePoolStats().outstandingBytes;
    const { page, start, end } = pageWith('{"content":"plain"}', '"plain"');
    const c = page.content(start, end);
    page.done();
    expect(pagePoolStats().outstandingBytes).toBeGreaterThan(before);
    expect(c.text()).toBe('plain');
    expect(pagePoolStats().outstandingBytes).toBe(before);
  });

  it('refuses a second read, and a measure after the read', () => {
    const { page, start, end } = pageWith('"x"', '"x"');
    const c = page.content(start, end);
    page.done();
    expect(c.text()).toBe('x');
    expect(() => c.text()).toThrow(/read twice/);
    expect(() => c.byteLength()).toThrow(/after it was read/);
    // Dropping a content already read changes nothing.
    c.drop();
  });

  it('reuses a returned buffer for the next page, and the old page, read anyway, throws rather than give the new bytes', () => {
    const first = pageWith('"old"', '"old"');
    const memory = first.page.bytes.buffer;
    const c = first.page.content(first.start, first.end);
    first.page.done();
    c.drop();
    const second = pageWith('"new"', '"new"');
    expect(second.page.bytes.buffer).toBe(memory);
    expect(second.page.bytes.toString('utf8', 0, 5)).toBe('"new"');
    expect(() => first.page.bytes).toThrow(/after it was given back/);
    expect(() => first.page.content(first.start, first.end)).toThrow(/after it was given back/);
    second.page.done();
  });

  it('throws when a page is released more often than it was held', () => {
    const { page } = pageWith('"x"', '"x"');
    page.done();
    expect(() => page.done()).toThrow(/more often than it was held/);
  });

  it('leaves a content that is never read to the collector: the pool lends a new buffer meanwhile', () => {
    const a = pageWith('"held"', '"held"');
    a.page.content(a.start, a.end);
    a.page.done();
    const b = pageWith('"other"', '"other"');
    expect(b.page.bytes.toString('utf8', 0, 7)).toBe('"other"');
    // The first page's bytes are untouched: it was not reused while a content held it.
    expect(a.page.bytes.toString('utf8', 0, 6)).toBe('"held"');
    b.page.done();
  });
});
