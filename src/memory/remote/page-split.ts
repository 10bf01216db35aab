/**
 * Splits the body of a listing page (its UTF-8 bytes) into the JSON texts of its `data` items,
 * without parsing them: the caller parses each on its own.
 *
 * Why: V8 allocates everything `JSON.parse` builds straight in the old generation when its input
 * is large (100 KiB or more), so parsing a page of large memories in one go makes every content
 * string old garbage, freed only by a full collection: the process grows by the content that went
 * through, not by what it holds. An item parsed from its own small text is young, and dies young
 * once written. The body stays bytes (outside the JavaScript heap) until each item is decoded: a
 * page never becomes one large string either (which would be old garbage as well).
 *
 * Rules: only a body that is one object whose `data` member (named once) is an array is split;
 * anything else (and any body the scanner cannot follow) gives `undefined`, and the caller parses
 * the whole body as before, so a malformed body fails the same way. Each item text is exactly one
 * element of the array, so it parses iff the whole body does. The scan works on bytes: no byte of
 * a multi-byte UTF-8 sequence is a quote, a backslash or a bracket. The caller checks that `rest`
 * parses with an empty `data` (another member spelled `data` with escapes would win otherwise).
 *
 * With `cutContents`, the string value of each item object's `content` member is cut out of the
 * item's text (replaced by `""`) and given as a byte range instead, so a content never becomes a
 * string before it is written (see page-bytes.ts). Only a plain `content` key is cut: an item with
 * a key spelled with escapes, or with `content` twice, leaves the page to the whole parse, as
 * JSON.parse would let another spelling of the key win. The range is not checked to be a valid
 * JSON string here: it is decoded (and refused if it is not one) when it is read.
 */

/** The page without its items (`data` emptied), and the JSON text of each item. */
export interface SplitPage {
  /** The body with `data` replaced by `[]`: parse it for the other members (`next_page`). */
  rest: string;
  items: SplitItem[];
}

/** One item: its JSON text, and (with `cutContents`) the byte range of the content string cut from it. */
export interface SplitItem {
  text: string;
  /** `[start, end)` of the `content` string token in the page's bytes, quotes included. */
  content?: readonly [number, number];
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const CONTENT_KEY = Buffer.from('content', 'latin1');

/** Index just past the string starting at `i` (a `"`), or -1. */
function skipString(text: Buffer, i: number): number {
  let j = i + 1;
  for (;;) {
    const q = text.indexOf(QUOTE, j);
    if (q < 0) return -1;
    // A quote preceded by an odd run of backslashes is escaped.
    let k = q - 1;
    while (k > i && text[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    j = q + 1;
  }
}

/** True when `[start, end)` holds only JSON whitespace (an empty array's inside). */
function isBlank(text: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = text[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return false;
  }
  return true;
}

export function splitPage(text: Buffer, opts: { cutContents?: boolean } = {}): SplitPage | undefined {
  const cut = opts.cutContents === true;
  let depth = 0;
  let dataStart = -1;
  let dataEnd = -1;
  let lastKey: string | undefined;
  let expectKey = false;
  let itemStart = -1;
  const items: SplitItem[] = [];
  let inData = false;
  let seenData = false;
  // The item object being scanned (depth 3): whether its next string is a key, whether the last
  // key was `content`, and the content token found in it.
  let inItem = false;
  let itemKey = false;
  let keyIsContent = false;
  let content: [number, number] | undefined;
  const pushItem = (end: number): void => {
    if (content === undefined) {
      items.push({ text: text.toString('utf8', itemStart, end) });
    } else {
      const [s, e] = content;
      items.push({ text: `${text.toString('utf8', itemStart, s)}""${text.toString('utf8', e, end)}`, content });
    }
    content = undefined;
  };
  for (let i = 0; i < text.length;) {
    const c = text[i]!;
    if (c === QUOTE) {
      const end = skipString(text, i);
      if (end < 0) return undefined;
      if (depth === 1 && expectKey) {
        lastKey = text.toString('utf8', i + 1, end - 1);
        expectKey = false;
      } else if (inItem && depth === 3) {
        if (itemKey) {
          if (text.subarray(i + 1, end - 1).indexOf(BACKSLASH) >= 0) return undefined;
          keyIsContent = end - i - 2 === CONTENT_KEY.length && text.compare(CONTENT_KEY, 0, CONTENT_KEY.length, i + 1, end - 1) === 0;
          if (keyIsContent && content !== undefined) return undefined;
          itemKey = false;
        } else if (keyIsContent) {
          content = [i, end];
          keyIsContent = false;
        }
      }
      i = end;
      continue;
    }
    switch (c) {
      case 0x7b /* { */:
      case 0x5b /* [ */:
        depth++;
        if (depth === 1 && c !== 0x7b) return undefined;
        if (depth === 1) expectKey = true;
        if (depth === 2 && c === 0x5b && lastKey === 'data') {
          if (seenData) return undefined;
          seenData = true;
          inData = true;
          dataStart = i;
          itemStart = i + 1;
        }
        if (cut && inData && depth === 3 && c === 0x7b) {
          inItem = true;
          itemKey = true;
          keyIsContent = false;
        }
        break;
      case 0x7d /* } */:
      case 0x5d /* ] */:
        if (inItem && depth === 3) {
          inItem = false;
          keyIsContent = false;
        }
        if (inData && depth === 2) {
          if (!isBlank(text, itemStart, i)) pushItem(i);
          else if (items.length > 0) return undefined;
          inData = false;
          dataEnd = i + 1;
        }
        depth--;
        if (depth < 0) return undefined;
        break;
      case 0x2c /* , */:
        if (inData && depth === 2) {
          pushItem(i);
          itemStart = i + 1;
        }
        if (inItem && depth === 3) {
          itemKey = true;
          keyIsContent = false;
        }
        if (depth === 1) expectKey = true;
        break;
      default:
        break;
    }
    i++;
  }
  if (depth !== 0 || dataStart < 0 || dataEnd < 0) return undefined;
  return { rest: `${text.toString('utf8', 0, dataStart)}[]${text.toString('utf8', dataEnd)}`, items };
}
