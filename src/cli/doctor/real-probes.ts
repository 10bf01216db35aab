import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { statusOf } from '../../api/classify.js';
import { SANDBOX_LIMITS_DEFAULT } from '../../sandbox/limits/limits.js';
import { hostEnforcement } from '../../sandbox/limits/session-limits.js';
import { probeSandbox } from '../../sandbox/probe.js';
import { headersOption } from '../custom-headers.js';
import type { DirState, DoctorProbes } from './checks.js';

/** The probes of a real doctor run. Scratch files go to fresh temp folders that are removed at once. */
export const realProbes: DoctorProbes = {
  platform: () => process.platform,
  nodeVersion: () => process.version,
  noFollow,
  dirState,
  caseSensitive,
  isExecutable: async (p) => {
    try {
      await fs.access(p, fsConstants.X_OK);
      return true;
    } catch {
      return false;
    }
  },
  api: async ({ baseURL, environmentId, environmentKey, defaultHeaders }) => {
    const client = new Anthropic({
      apiKey: null,
      authToken: environmentKey,
      baseURL: baseURL ?? null,
      maxRetries: 0,
      timeout: 15_000,
      ...headersOption(defaultHeaders),
    });
    const started = performance.now();
    try {
      const { response } = await client.beta.environments.work.list(environmentId, { limit: 1 }).withResponse();
      return { ok: true, latencyMs: Math.round(performance.now() - started), serverDate: response.headers.get('date') ?? undefined };
    } catch (e) {
      const status = statusOf(e);
      const what = status === undefined ? 'no answer' : `HTTP ${status}`;
      return { ok: false, status, message: `listing work items of ${environmentId} failed: ${what}` };
    }
  },
  nowMs: () => Date.now(),
  // One session's sandbox, started once (the probe is cached), answers every sandbox row.
  sandbox: async () => {
    const probe = await probeSandbox();
    return probe.ok ? { ok: true, bwrap: probe.bwrap } : { ok: false, reason: probe.reason, problem: probe.problem, fix: probe.fix };
  },
  sandboxKernel: async () => {
    const probe = await probeSandbox();
    if (!probe.ok) return { ran: false, problem: probe.problem };
    const { network: _network, ...kernel } = probe.report;
    return { ran: true, ...kernel };
  },
  network: async () => {
    const probe = await probeSandbox();
    return probe.ok ? probe.report.network : undefined;
  },
  sandboxLimits: async () => hostEnforcement(SANDBOX_LIMITS_DEFAULT),
};

async function noFollow(): Promise<{ ok: boolean; detail: string }> {
  if (fsConstants.O_NOFOLLOW === undefined) return { ok: false, detail: 'fs.constants.O_NOFOLLOW is not defined on this platform' };
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-doctor-'));
  try {
    await fs.writeFile(path.join(dir, 'target'), 'x');
    await fs.symlink(path.join(dir, 'target'), path.join(dir, 'link'));
    try {
      const fh = await fs.open(path.join(dir, 'link'), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
      await fh.close();
      return { ok: false, detail: 'opening a symlink with O_NOFOLLOW succeeded; symlinks cannot be refused' };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'EMLINK') return { ok: true, detail: `a symlink open is refused (${code})` };
      return { ok: false, detail: `unexpected error opening a symlink with O_NOFOLLOW: ${code ?? String(e)}` };
    }
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

async function dirState(p: string): Promise<DirState> {
  let st;
  try {
    st = await fs.stat(p);
  } catch {
    return 'missing';
  }
  if (!st.isDirectory()) return 'not_directory';
  try {
    // access() alone misses read-only mounts and some ACLs; creating a folder does not.
    const probe = await fs.mkdtemp(path.join(p, '.maw-doctor-'));
    await fs.rmdir(probe);
    return 'ok';
  } catch {
    return 'not_writable';
  }
}

async function caseSensitive(dir: string): Promise<boolean | undefined> {
  let scratch: string | undefined;
  try {
    scratch = await fs.mkdtemp(path.join(dir, '.maw-case-'));
    await fs.writeFile(path.join(scratch, 'probe'), 'x');
    try {
      await fs.stat(path.join(scratch, 'PROBE'));
      return false;
    } catch {
      return true;
    }
  } catch {
    return undefined;
  } finally {
    if (scratch) await fs.rm(scratch, { recursive: true, force: true });
  }
}
