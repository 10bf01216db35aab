// Pins what a sandbox command's environment holds: the allow-listed variables and those the
// operator names, read from the launcher's environment, then the item's own variables. The work
// secret goes in when the item has one; the environment key only when the secret yields no
// sessions token. Nothing else from the launcher's environment passes.
import { describe, expect, it } from 'vitest';
import { SANDBOX_BASE_ENV_VARS, sandboxEnv } from '../../src/launcher/sandbox-env.js';
import { encodeWorkSecret } from '../../src/worker/credentials.js';

const KEY = 'sk-ant-envkey-launcher-0c4f';
const SECRET = encodeWorkSecret({ sessions_token: 'sk-ant-req-item-1' });
const source = {
  PATH: '/usr/bin:/bin',
  HOME: '/home/op',
  LANG: 'C.UTF-8',
  ANTHROPIC_ENVIRONMENT_KEY: KEY,
  ANTHROPIC_API_KEY: 'sk-ant-api-console',
  DOCKER_HOST: 'unix:///run/docker.sock',
  DB_PASSWORD: 'hunter2',
};
const item = { workId: 'work_1', environmentId: 'env_1', sessionId: 'sesn_1' };
const itemVars = {
  ANTHROPIC_WORK_ID: 'work_1',
  ANTHROPIC_ENVIRONMENT_ID: 'env_1',
  ANTHROPIC_SESSION_ID: 'sesn_1',
  ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
};
const base = { PATH: '/usr/bin:/bin', HOME: '/home/op', LANG: 'C.UTF-8' };

describe('sandboxEnv', () => {
  const rows = [
    {
      description: 'an item with a secret gets the secret and no environment key',
      secret: SECRET,
      passEnv: [],
      env: { ...base, ...itemVars, ANTHROPIC_WORK_SECRET: SECRET },
      keyPassed: false,
    },
    {
      description: 'an item without a secret gets the environment key',
      secret: null,
      passEnv: [],
      env: { ...base, ...itemVars, ANTHROPIC_ENVIRONMENT_KEY: KEY },
      keyPassed: true,
    },
    {
      description: 'an item whose secret yields no token gets both, so handle can fall back to the key',
      secret: 'not-base64!',
      passEnv: [],
      env: { ...base, ...itemVars, ANTHROPIC_WORK_SECRET: 'not-base64!', ANTHROPIC_ENVIRONMENT_KEY: KEY },
      keyPassed: true,
    },
    {
      description: 'variables the operator names pass; a named variable that is unset is left out',
      secret: SECRET,
      passEnv: ['DOCKER_HOST', 'KUBECONFIG'],
      env: { ...base, ...itemVars, ANTHROPIC_WORK_SECRET: SECRET, DOCKER_HOST: 'unix:///run/docker.sock' },
      keyPassed: false,
    },
  ];
  for (const row of rows) {
    it(row.description, () => {
      const out = sandboxEnv({
        source,
        passEnv: row.passEnv,
        item: { ...item, secret: row.secret },
        environmentKey: KEY,
        baseURL: 'http://127.0.0.1:9',
      });
      expect(out.env).toEqual(row.env);
      expect(out.environmentKeyPassed).toBe(row.keyPassed);
    });
  }

  it("never copies the launcher's own credentials or unnamed variables", () => {
    const out = sandboxEnv({ source, passEnv: [], item: { ...item, secret: SECRET }, environmentKey: KEY, baseURL: 'http://x' });
    expect(Object.values(out.env)).not.toContain(KEY);
    expect(out.env).not.toHaveProperty('ANTHROPIC_API_KEY');
    expect(out.env).not.toHaveProperty('DB_PASSWORD');
  });

  it('holds no ANTHROPIC_ variable in its allow-list', () => {
    expect(SANDBOX_BASE_ENV_VARS.filter((n) => n.startsWith('ANTHROPIC_'))).toEqual([]);
  });
});
