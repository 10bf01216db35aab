// Pins the default worker id: the OS host name (what `os.hostname()` says, exported or not as
// HOSTNAME), then HOSTNAME, and a bare uuid only when neither names the host.
import os from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultWorkerId } from '../../src/worker/poller.js';

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('defaultWorkerId', () => {
  const saved = process.env['HOSTNAME'];
  afterEach(() => {
    if (saved === undefined) delete process.env['HOSTNAME'];
    else process.env['HOSTNAME'] = saved;
  });

  it('starts with the OS host name when HOSTNAME is not exported', () => {
    delete process.env['HOSTNAME'];
    const id = defaultWorkerId();
    expect(id.startsWith(`${os.hostname()}-`)).toBe(true);
    expect(id).toMatch(UUID);
  });

  it('prefers the OS host name over HOSTNAME, falls back to HOSTNAME, and is a bare uuid only without either', () => {
    process.env['HOSTNAME'] = 'from-env';
    expect(defaultWorkerId(() => 'box-1').startsWith('box-1-')).toBe(true);
    expect(defaultWorkerId(() => '').startsWith('from-env-')).toBe(true);
    delete process.env['HOSTNAME'];
    expect(defaultWorkerId(() => '')).toMatch(new RegExp(`^${UUID.source}`));
  });
});
