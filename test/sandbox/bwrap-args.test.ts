// The bubblewrap command line a session's view turns into: pure, table-tested.
import { describe, expect, it } from 'vitest';
import { bwrapArgs, isPathInside, maskedPaths, type SandboxView } from '../../src/sandbox/bwrap-args.js';

const base: SandboxView = {
  system: [{ path: '/usr' }, { path: '/bin', symlinkTo: 'usr/bin' }],
  readOnly: ['/etc/passwd', '/opt/node/bin/node'],
  workdir: '/tmp/w/sessions/s1',
  stores: [
    { path: '/mnt/memory/notes', readOnly: false },
    { path: '/mnt/memory/policy', readOnly: true },
  ],
  readWrite: [],
  hide: [],
  network: 'host',
  userNamespace: false,
  env: { PATH: '/usr/bin', HOME: '/tmp/w/sessions/s1' },
  command: ['/opt/node/bin/node', '/pkg/dist/sandbox/tool-host.cjs'],
};

/** The pairs `flag a b` of a command line, as strings, in order. */
function triples(args: string[], flag: string): string[] {
  const out: string[] = [];
  args.forEach((a, i) => {
    if (a === flag) out.push(`${args[i + 1]} ${args[i + 2]}`);
  });
  return out;
}

describe('bwrapArgs', () => {
  it('isolates namespaces, drops every capability, clears the environment and dies with the worker', () => {
    const args = bwrapArgs(base);
    for (const f of ['--die-with-parent', '--new-session', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--clearenv'])
      expect(args).toContain(f);
    expect(args.slice(args.indexOf('--cap-drop'), args.indexOf('--cap-drop') + 2)).toEqual(['--cap-drop', 'ALL']);
    expect(args).not.toContain('--unshare-net');
    expect(args).not.toContain('--unshare-user');
    expect(triples(args, '--setenv')).toEqual(['PATH /usr/bin', 'HOME /tmp/w/sessions/s1']);
  });

  it('binds a read-only store read-only and a read-write one read-write, after the workdir', () => {
    const args = bwrapArgs(base);
    expect(triples(args, '--ro-bind')).toContain('/mnt/memory/policy /mnt/memory/policy');
    expect(triples(args, '--bind')).toEqual(['/tmp/w/sessions/s1 /tmp/w/sessions/s1', '/mnt/memory/notes /mnt/memory/notes']);
    expect(args.indexOf('/mnt/memory/policy')).toBeGreaterThan(args.indexOf('/tmp/w/sessions/s1'));
  });

  it("binds a session's own copy of a store from its host folder at the store's mount path", () => {
    const args = bwrapArgs({
      ...base,
      stores: [
        { hostPath: '/var/state/session-stores/s1/notes-1', path: '/mnt/memory/notes', readOnly: false },
        { hostPath: '/var/state/session-stores/s1/policy-2', path: '/mnt/memory/policy', readOnly: true },
      ],
      hide: [{ path: '/var/state', kind: 'dir' }],
    });
    expect(triples(args, '--bind')).toContain('/var/state/session-stores/s1/notes-1 /mnt/memory/notes');
    expect(triples(args, '--ro-bind')).toContain('/var/state/session-stores/s1/policy-2 /mnt/memory/policy');
    // The state folder is not visible where the copies appear: nothing masks the mount paths.
    expect(args.filter((_a, i) => args[i - 1] === '--tmpfs')).toEqual(['/dev/shm', '/tmp']);
  });

  it('puts the private /tmp before every bind, so a workdir under /tmp lands on top of it', () => {
    const args = bwrapArgs(base);
    const tmpfs = args.indexOf('/tmp', args.indexOf('--tmpfs'));
    expect(tmpfs).toBeGreaterThan(0);
    expect(tmpfs).toBeLessThan(args.indexOf('--bind'));
    expect(tmpfs).toBeLessThan(args.indexOf('/opt/node/bin/node'));
  });

  it('recreates a merged-/usr symlink instead of binding it', () => {
    expect(triples(bwrapArgs(base), '--symlink')).toEqual(['usr/bin /bin']);
  });

  it.each([
    { what: "network 'none' unshares the network", view: { network: 'none' as const }, has: '--unshare-net' },
    { what: 'a non-root worker gets a user namespace', view: { userNamespace: true }, has: '--unshare-user' },
    {
      what: 'nested user namespaces are refused in the user namespace',
      view: { userNamespace: true, disableNestedUserNamespaces: true },
      has: '--disable-userns',
    },
  ])('$what', ({ view, has }) => {
    expect(bwrapArgs({ ...base, ...view })).toContain(has);
  });

  it('asks for --disable-userns only with a user namespace, which bubblewrap requires for it', () => {
    expect(bwrapArgs({ ...base, userNamespace: false, disableNestedUserNamespaces: true })).not.toContain('--disable-userns');
    expect(bwrapArgs({ ...base, userNamespace: true })).not.toContain('--disable-userns');
  });

  it('starts the command in the workdir, after the options', () => {
    const args = bwrapArgs(base);
    expect(args.slice(-5)).toEqual(['--chdir', '/tmp/w/sessions/s1', '--', '/opt/node/bin/node', '/pkg/dist/sandbox/tool-host.cjs']);
  });
});

describe('hidden paths', () => {
  it.each([
    { path: '/tmp/w/sessions/s1/.state', kind: 'dir' as const, masked: '--tmpfs /tmp/w/sessions/s1/.state' },
    { path: '/mnt/memory/notes/key', kind: 'file' as const, masked: '--ro-bind /dev/null /mnt/memory/notes/key' },
    { path: '/etc/passwd', kind: 'file' as const, masked: '--ro-bind /dev/null /etc/passwd' },
  ])('$path inside a bound path is masked', ({ path, kind, masked }) => {
    const args = bwrapArgs({ ...base, hide: [{ path, kind }] }).join(' ');
    expect(args).toContain(masked);
    // After what it hides.
    expect(args.lastIndexOf(masked)).toBeGreaterThan(args.indexOf(`--bind /mnt/memory/notes`));
  });

  it.each(['/home/op/.local/state/managed-agents-worker', '/root/key', '/mnt/memory/notes-other', '/tmp/w/sessions/s10'])(
    '%s outside every bound path is left alone (it is absent anyway)',
    (p) => {
      expect(maskedPaths({ ...base, hide: [{ path: p, kind: 'dir' }] })).toEqual([]);
    },
  );
});

describe('isPathInside', () => {
  it.each([
    ['/a', '/a', true],
    ['/a', '/a/b', true],
    ['/a', '/ab', false],
    ['/a/b', '/a', false],
    ['/', '/x', true],
  ])('%s contains %s: %s', (root, p, expected) => {
    expect(isPathInside(root, p)).toBe(expected);
  });
});
