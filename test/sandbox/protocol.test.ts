// The host's pipe: lines split anywhere, bounded in bytes, checked against the message schema.
import { describe, expect, it } from 'vitest';
import { encodeLine, LineDecoder } from '../../src/sandbox/protocol.js';

const result = { t: 'result' as const, id: 3, isError: false, content: 'héllo\nworld' };

describe('LineDecoder', () => {
  it('reassembles a message split at every byte, multi-byte characters included', () => {
    const bytes = Buffer.from(encodeLine(result) + encodeLine({ t: 'ready' }));
    const d = new LineDecoder();
    const got: unknown[] = [];
    for (let i = 0; i < bytes.length; i++) {
      const r = d.push(bytes.subarray(i, i + 1));
      if ('problem' in r) throw new Error(r.problem);
      got.push(...r.messages);
    }
    expect(got).toEqual([result, { t: 'ready' }]);
  });

  it('takes content blocks as the toolset returns them', () => {
    const blocks = {
      t: 'result',
      id: 1,
      isError: false,
      content: [
        { type: 'text', text: 'a' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } },
      ],
    };
    expect(new LineDecoder().push(Buffer.from(`${JSON.stringify(blocks)}\n`))).toEqual({ messages: [blocks] });
  });

  it.each([
    ['not JSON', 'garbage\n', 'not JSON'],
    ['an unknown type', '{"t":"exec","cmd":"rm"}\n', 'unknown shape'],
    ['a wrong field type', '{"t":"result","id":"1","isError":false,"content":"x"}\n', 'unknown shape'],
    ['an extra field', '{"t":"result","id":1,"isError":false,"content":"x","extra":1}\n', 'unknown shape'],
    ['a negative id', '{"t":"result","id":-1,"isError":false,"content":"x"}\n', 'unknown shape'],
  ])('refuses %s, and stays broken after', (_what, line, problem) => {
    const d = new LineDecoder();
    const r = d.push(Buffer.from(line));
    expect(r).toEqual({ problem: expect.stringContaining(problem) as string });
    expect(d.push(Buffer.from(encodeLine(result)))).toHaveProperty('problem');
  });

  it('refuses a line longer than its bound, also when it comes without a newline, in pieces', () => {
    const d = new LineDecoder(64);
    expect(d.push(Buffer.alloc(40, 0x61))).toEqual({ messages: [] });
    expect(d.push(Buffer.alloc(40, 0x61))).toEqual({ problem: 'a line of more than 64 bytes' });
    const whole = new LineDecoder(16);
    expect(whole.push(Buffer.from(encodeLine(result)))).toEqual({ problem: 'a line of more than 16 bytes' });
  });
});
