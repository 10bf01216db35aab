// The environment inside a sandbox: the allow-list and the operator's names, never ANTHROPIC_*.
import { describe, expect, it } from 'vitest';
import { sandboxEnvironment } from '../../src/sandbox/tool-env.js';

const worker = {
  PATH: '/usr/local/bin:/usr/bin',
  LANG: 'C.UTF-8',
  TZ: 'UTC',
  HOME: '/home/worker',
  ANTHROPIC_ENVIRONMENT_KEY: 'sk-ant-env-secret',
  anthropic_work_secret: 'lower-case-secret',
  AWS_SECRET_ACCESS_KEY: 'aws-secret',
  DATABASE_URL: 'postgres://u:p@db/x',
  GIT_AUTHOR_NAME: 'Agent',
  NODE_OPTIONS: '--require /home/worker/hook.js',
};

describe('sandboxEnvironment', () => {
  it('keeps the allow-list, sets HOME and TMPDIR, drops everything else', () => {
    expect(sandboxEnvironment(worker, [], '/w/s1')).toEqual({
      PATH: '/usr/local/bin:/usr/bin',
      LANG: 'C.UTF-8',
      TZ: 'UTC',
      HOME: '/w/s1',
      TMPDIR: '/tmp',
    });
  });

  it('adds the names the operator passes, but never an ANTHROPIC_* one, whatever its case', () => {
    const env = sandboxEnvironment(
      worker,
      ['GIT_AUTHOR_NAME', 'ANTHROPIC_ENVIRONMENT_KEY', 'anthropic_work_secret', 'UNSET_NAME'],
      '/w/s1',
    );
    expect(env['GIT_AUTHOR_NAME']).toBe('Agent');
    expect(JSON.stringify(env)).not.toMatch(/secret/i);
    expect('UNSET_NAME' in env).toBe(false);
  });

  it('gives a PATH when the worker has none', () => {
    expect(sandboxEnvironment({}, [], '/w')['PATH']).toBe('/usr/local/bin:/usr/bin:/bin');
  });
});
