// Pins the page splitter: for any page body, the items it splits out parse to exactly the items of
// JSON.parse of the whole, and the rest to the other members; a body it cannot follow is left to
// the whole parse (undefined), never split wrongly.
import { describe, expect, it } from 'vitest';
import { splitPage } from '../../../src/memory/remote/page-split.js';

function parsedBack(text: string): unknown {
  const split = splitPage(Buffer.from(text, 'utf8'));
  if (split === undefined) return undefined;
  const rest = JSON.parse(split.rest) as Record<string, unknown>;
  return { ...rest, data: split.items.map((t) => JSON.parse(t.text) as unknown) };
}

describe('splitPage', () => {
  const tricky = ['plain', 'quote " inside', 'backslash \\', 'both \\" and \\\\"', '{ [ , ] }', 'unicode é ✓ 𝄞', 'new\nline', ''];
  it.each([
    {
      name: 'a page of memories',
      body: { data: tricky.map((content, i) => ({ type: 'memory', id: `m${i}`, path: `/a/${i}.md`, content })), next_page: 'cur,sor]' },
    },
    { name: 'an empty page', body: { data: [], next_page: null } },
    {
      name: 'data after next_page',
      body: { next_page: 'x', data: [{ type: 'memory_prefix', path: '/a/' }, { n: [1, [2, { '"data"': 3 }]] }] },
    },
    { name: 'nested data keys', body: { meta: { data: [1, 2] }, data: [{ data: ['x'] }] } },
  ])('gives back the same items and members for $name', ({ body }) => {
    for (const text of [JSON.stringify(body), JSON.stringify(body, null, 2)]) {
      expect(parsedBack(text)).toEqual(JSON.parse(text));
    }
  });

  it.each([
    { name: 'no data member', text: '{"items":[1]}' },
    { name: 'data not an array', text: '{"data":{"a":1}}' },
    { name: 'data named twice', text: '{"data":[1],"data":[2]}' },
    { name: 'an array body', text: '[{"data":[1]}]' },
    { name: 'an unterminated string', text: '{"data":["abc]}' },
    { name: 'unbalanced brackets', text: '{"data":[1]' },
  ])('leaves $name to the whole parse', ({ text }) => {
    expect(splitPage(Buffer.from(text, 'utf8'))).toBeUndefined();
  });

  it('splits items whose content holds every kind of escape the same as the whole parse, over random contents', () => {
    const alphabet = ['a', '"', '\\', ',', '[', ']', '{', '}', '\n', 'é', '\u0000', ':'];
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 200; round++) {
      const data = Array.from({ length: rand(6) }, (_, i) => ({
        id: `m${i}`,
        content: Array.from({ length: rand(40) }, () => alphabet[rand(alphabet.length)]).join(''),
      }));
      const text = JSON.stringify({ data, next_page: rand(2) === 0 ? null : 'p"q' });
      expect(parsedBack(text)).toEqual(JSON.parse(text));
    }
  });

  describe('with cutContents', () => {
    /** The items as JSON.parse of the whole gives them, rebuilt from the cut: each text parsed, its content read from its range. */
    function parsedBackCut(text: string): unknown {
      const bytes = Buffer.from(text, 'utf8');
      const split = splitPage(bytes, { cutContents: true });
      if (split === undefined) return undefined;
      const rest = JSON.parse(split.rest) as Record<string, unknown>;
      const data = split.items.map((t) => {
        const item = JSON.parse(t.text) as Record<string, unknown>;
        if (t.content === undefined) return item;
        expect(item['content']).toBe('');
        return { ...item, content: JSON.parse(bytes.toString('utf8', t.content[0], t.content[1])) as unknown };
      });
      return { ...rest, data };
    }

    it.each([
      {
        name: 'memories with every kind of content',
        body: { data: tricky.map((content, i) => ({ type: 'memory', id: `m${i}`, content, path: `/a/${i}.md` })), next_page: null },
      },
      { name: 'a null content and a missing one', body: { data: [{ id: 'a', content: null }, { id: 'b' }] } },
      { name: 'a content that is an object, with a content inside', body: { data: [{ content: { content: 'deep' }, id: 'x' }] } },
      { name: 'a key whose value is the string "content"', body: { data: [{ kind: 'content', content: 'real' }] } },
      { name: 'items that are not objects', body: { data: ['content', ['content', 'x'], 3, null] } },
    ])('cuts each content out and gives back the same items for $name', ({ body }) => {
      for (const text of [JSON.stringify(body), JSON.stringify(body, null, 2)]) {
        expect(parsedBackCut(text)).toEqual(JSON.parse(text));
      }
    });

    it('cuts only the top-level content of an item, at the byte range of its string token', () => {
      const text = '{"data":[{"id":"a","meta":{"content":"no"},"content":"yes \\n é"}]}';
      const bytes = Buffer.from(text, 'utf8');
      const split = splitPage(bytes, { cutContents: true })!;
      const [start, end] = split.items[0]!.content!;
      expect(bytes.toString('utf8', start, end)).toBe('"yes \\n é"');
      expect(JSON.parse(split.items[0]!.text)).toEqual({ id: 'a', meta: { content: 'no' }, content: '' });
    });

    it.each([
      { name: 'content named twice', text: '{"data":[{"content":"a","content":"b"}]}' },
      { name: 'a key spelled with an escape', text: '{"data":[{"content":"a","cont\\u0065nt":"b"}]}' },
      { name: 'any escaped key in an item', text: '{"data":[{"i\\u0064":"a","content":"b"}]}' },
    ])('leaves a page with $name to the whole parse', ({ text }) => {
      expect(splitPage(Buffer.from(text, 'utf8'), { cutContents: true })).toBeUndefined();
      // Without cutting, the same page is split as before.
      expect(splitPage(Buffer.from(text, 'utf8'))).toBeDefined();
    });
  });
});
