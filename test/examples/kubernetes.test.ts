// Pins the Kubernetes examples: every manifest in examples/kubernetes/ (and the sandbox Job
// template, its placeholders filled) is valid against the Kubernetes and KEDA schemas; the pieces
// refer to each other (the ScaledObject scales a Deployment of its file, each Service selects a
// Deployment and targets a port it declares, the workloads run commands the CLI has); the
// autoscaling query reads metrics the library exports; the poll daemon's pods can start a
// bubblewrap sandbox per session without privileges (their own user namespace, an unmasked /proc,
// the shipped seccomp profile installed where they name it, the shipped AppArmor profile, no
// capability, bubblewrap in the image; docs/containers.md); and the queue exporter script serves
// the emulator's queue depth and exits 0 on SIGTERM. Needs `npm run build` first (npm test does).
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { EventEmitter } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import * as core from 'kubernetes-models/v1';
import * as apps from 'kubernetes-models/apps/v1';
import * as batch from 'kubernetes-models/batch/v1';
import * as rbac from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveMetrics } from '../../src/metrics/index.js';
import type { ObservedWorker } from '../../src/metrics/observed-worker.js';
import { startEmulator, type Emulator } from '../../src/testing/index.js';

const exec = promisify(execFile);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DIR = path.join(REPO, 'examples/kubernetes');

interface Doc {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
}

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': core.ConfigMap,
  'v1/Secret': core.Secret,
  'v1/Service': core.Service,
  'v1/ServiceAccount': core.ServiceAccount,
  'apps/v1/Deployment': apps.Deployment,
  'apps/v1/DaemonSet': apps.DaemonSet,
  'batch/v1/Job': batch.Job,
  'rbac.authorization.k8s.io/v1/Role': rbac.Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': rbac.RoleBinding,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
};

/** Kubernetes reads manifests as YAML 1.1 (`0400` is octal there). */
function parseManifest(text: string): Doc[] {
  return parseAllDocuments(text, { version: '1.1' }).map((d) => {
    if (d.errors.length > 0) throw new Error(d.errors.map((e) => e.message).join('\n'));
    return d.toJS() as Doc;
  });
}

async function manifests(): Promise<Array<{ file: string; docs: Doc[] }>> {
  const files = (await fs.readdir(DIR)).filter((f) => f.endsWith('.yaml')).map((f) => path.join(DIR, f));
  const out = [];
  for (const file of files) out.push({ file: path.relative(REPO, file), docs: parseManifest(await fs.readFile(file, 'utf8')) });
  // The Job template launch.sh fills in with envsubst.
  const template = await fs.readFile(path.join(REPO, 'examples/sandbox-per-session/k8s-job.yaml'), 'utf8');
  const filled = template.replace(/\$\{(\w+)\}/g, (_m, name: string) =>
    name === 'SANDBOX_IMAGE' ? 'managed-agents-worker-sandbox' : `maw-${name.toLowerCase().replace(/_/g, '-')}`,
  );
  out.push({ file: 'examples/sandbox-per-session/k8s-job.yaml', docs: parseManifest(filled) });
  return out;
}

const containersOf = (d: Doc): Array<{ command?: string[]; ports?: Array<{ name?: string; containerPort: number }> }> =>
  ((d.spec?.['template'] as { spec: { containers: [] } } | undefined)?.spec.containers ?? []) as never;

describe('the Kubernetes manifests', () => {
  let all: Array<{ file: string; docs: Doc[] }>;
  beforeAll(async () => {
    all = await manifests();
  });

  it('include the poll daemon with its ScaledObject and the launcher', () => {
    const kinds = all.flatMap(({ file, docs }) => docs.map((d) => `${path.basename(file)}:${d.kind}/${d.metadata.name}`));
    expect(kinds).toEqual(
      expect.arrayContaining([
        'poll-daemon.yaml:Deployment/maw-worker',
        'poll-daemon.yaml:Deployment/maw-queue-exporter',
        'poll-daemon.yaml:ScaledObject/maw-worker',
        'launcher.yaml:Deployment/maw-launcher',
        'node-profiles.yaml:DaemonSet/maw-node-profiles',
        'k8s-job.yaml:Job/maw-job-name',
      ]),
    );
  });

  it('are valid against the Kubernetes and KEDA schemas', () => {
    const problems: string[] = [];
    for (const { file, docs } of all) {
      for (const d of docs) {
        const Model = MODELS[`${d.apiVersion}/${d.kind}`];
        if (!Model) {
          problems.push(`${file}: no schema known for ${d.apiVersion} ${d.kind}`);
          continue;
        }
        try {
          new Model(d as never).validate();
        } catch (e) {
          problems.push(`${file}: ${d.kind}/${d.metadata.name}: ${(e as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('refer to each other: scale targets, service selectors and ports exist', () => {
    for (const { file, docs } of all) {
      const deployments = docs.filter((d) => d.kind === 'Deployment');
      for (const so of docs.filter((d) => d.kind === 'ScaledObject')) {
        const target = (so.spec?.['scaleTargetRef'] as { name: string }).name;
        expect(
          deployments.map((d) => d.metadata.name),
          `${file}: ScaledObject target`,
        ).toContain(target);
      }
      for (const svc of docs.filter((d) => d.kind === 'Service')) {
        const selector = svc.spec?.['selector'] as Record<string, string>;
        const selected = deployments.find((d) => {
          const labels = (d.spec?.['template'] as { metadata: { labels: Record<string, string> } }).metadata.labels;
          return Object.entries(selector).every(([k, v]) => labels[k] === v);
        });
        expect(selected, `${file}: Service ${svc.metadata.name} selects a Deployment`).toBeDefined();
        const portNames = containersOf(selected!).flatMap((c) => (c.ports ?? []).map((p) => p.name));
        for (const p of svc.spec?.['ports'] as Array<{ targetPort: string }>) expect(portNames).toContain(p.targetPort);
      }
    }
  });

  it('run commands the CLI and the image have', async () => {
    const commands = all.flatMap(({ docs }) => docs.flatMap((d) => containersOf(d).map((c) => c.command ?? [])));
    const cli = commands.filter((c) => c[0] === 'managed-agents-worker').map((c) => c[1]);
    expect(new Set(cli)).toEqual(new Set(['run', 'launch']));
    const scripts = commands.filter((c) => c[0] === 'node').map((c) => c[1]!);
    expect(scripts).toEqual(['/opt/maw/queue-exporter.mjs']);
    const dockerfile = await fs.readFile(path.join(DIR, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain('COPY examples/kubernetes/queue-exporter.mjs /opt/maw/queue-exporter.mjs');
  });

  it('pass only flags the CLI documents for that command', async () => {
    const commands = all
      .flatMap(({ docs }) => docs.flatMap((d) => containersOf(d).map((c) => c.command ?? [])))
      .filter((c) => c[0] === 'managed-agents-worker');
    const unknown: string[] = [];
    for (const [, sub, ...args] of commands) {
      const { stdout } = await exec(process.execPath, [path.join(REPO, 'dist/cli/main.js'), sub!, '--help']);
      for (const arg of args) {
        const flag = /^(--[a-z-]+)/.exec(arg)?.[1];
        if (flag && !new RegExp(`${flag}\\b`).test(stdout)) unknown.push(`${sub} ${flag}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('scale on metrics the library exports', async () => {
    const so = all.flatMap(({ docs }) => docs).find((d) => d.kind === 'ScaledObject')!;
    const trigger = (so.spec?.['triggers'] as Array<{ type: string; metadata: { query: string } }>)[0]!;
    expect(trigger.type).toBe('prometheus');
    const names = [...new Set(trigger.metadata.query.match(/\bmaw_[a-z_]+/g))];
    expect(names).toEqual(expect.arrayContaining(['maw_work_queue_depth', 'maw_sessions_active']));

    const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-k8s-'));
    const emu = await startEmulator({ mountRoot: tmp, latencyMs: 0 });
    const worker = Object.assign(new EventEmitter(), {
      activeSessions: 0,
      closing: false,
      lastPollOkAt: undefined,
    }) as unknown as ObservedWorker;
    const client = new Anthropic({ apiKey: 'unused', baseURL: emu.baseURL, logLevel: 'off' });
    const server = await serveMetrics({
      worker,
      port: 0,
      host: '127.0.0.1',
      processMetrics: false,
      workQueue: { client, environmentId: emu.environmentId, environmentKey: emu.environmentKey },
    });
    try {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      for (const name of names) expect(text).toMatch(new RegExp(`^${name}(\\{[^}]*\\})? `, 'm'));
    } finally {
      await server.close();
      await emu.close();
      await fs.rm(tmp, { recursive: true, force: true });
    }
  });
});

interface Container {
  name: string;
  image?: string;
  command?: string[];
  securityContext?: Record<string, unknown>;
  resources?: { limits?: Record<string, string> };
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface PodSpec {
  hostUsers?: boolean;
  securityContext?: Record<string, unknown>;
  containers: Container[];
  initContainers?: Container[];
  volumes?: Array<{
    name: string;
    hostPath?: { path: string };
    configMap?: { name: string; items?: Array<{ key: string; path: string }> };
  }>;
}
const podSpecOf = (d: Doc): PodSpec => (d.spec?.['template'] as { spec: PodSpec }).spec;

/** Every `privileged` key anywhere in a document, with its path. */
function privilegedKeys(value: unknown, at = ''): string[] {
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) =>
    k === 'privileged' ? [`${at}.${k}=${String(v)}`] : privilegedKeys(v, `${at}.${k}`),
  );
}

describe("the poll daemon's per-session sandbox", () => {
  let all: Array<{ file: string; docs: Doc[] }>;
  let worker: PodSpec;
  beforeAll(async () => {
    all = await manifests();
    worker = podSpecOf(all.flatMap(({ docs }) => docs).find((d) => d.kind === 'Deployment' && d.metadata.name === 'maw-worker')!);
  });

  it('runs the pod in a user namespace of its own, as a user other than root', () => {
    expect(worker.hostUsers).toBe(false);
    expect(worker.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001 });
  });

  it('gives the worker an unmasked /proc, the shipped seccomp and AppArmor profiles, and no capability', () => {
    const apparmorName = /^profile (\S+) /m.exec(readFileSync(path.join(REPO, 'profiles/apparmor-bubblewrap'), 'utf8'))?.[1];
    for (const c of worker.containers) {
      expect(c.securityContext, c.name).toMatchObject({
        procMount: 'Unmasked',
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'Localhost', localhostProfile: 'managed-agents-worker/seccomp-bubblewrap.json' },
        appArmorProfile: { type: 'Localhost', localhostProfile: apparmorName },
      });
      expect(c.securityContext?.['capabilities'], c.name).not.toHaveProperty('add');
      // The profile it names is the file the package ships.
      const profile = (c.securityContext?.['seccompProfile'] as { localhostProfile: string }).localhostProfile;
      expect(existsSync(path.join(REPO, 'profiles', path.basename(profile))), profile).toBe(true);
    }
  });

  it('bounds all sessions of a pod together with its memory and CPU limits', () => {
    for (const c of worker.containers) expect(Object.keys(c.resources?.limits ?? {}).sort(), c.name).toEqual(['cpu', 'memory']);
  });

  it('is privileged nowhere', () => {
    expect(
      all.flatMap(({ file, docs }) => docs.flatMap((d) => privilegedKeys(d).map((k) => `${file}: ${d.kind}/${d.metadata.name}${k}`))),
    ).toEqual([]);
  });

  it('has its seccomp profile installed on each node where the worker names it', () => {
    const ds = all.flatMap(({ docs }) => docs).find((d) => d.kind === 'DaemonSet' && d.metadata.name === 'maw-node-profiles')!;
    const spec = podSpecOf(ds);
    expect(spec.hostUsers).not.toBe(false); // it writes a folder of the node's root
    const install = spec.initContainers!.find((c) => c.name === 'install-seccomp-profile')!;
    expect(install.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    // The host folder mounted in the installer is the kubelet's seccomp root.
    const hostMount = install.volumeMounts!.find((m) => spec.volumes!.find((v) => v.name === m.name)?.hostPath)!;
    expect(spec.volumes!.find((v) => v.name === hostMount.name)!.hostPath!.path).toBe('/var/lib/kubelet/seccomp');
    expect(spec.volumes!.filter((v) => v.hostPath)).toHaveLength(1);
    // It copies the ConfigMap's profile to <seccomp root>/<the worker's localhostProfile>.
    const script = install.command!.join(' ');
    const localhostProfile = (worker.containers[0]!.securityContext!['seccompProfile'] as { localhostProfile: string }).localhostProfile;
    expect(script).toMatch(new RegExp(`mv -f \\S+\\s+${hostMount.mountPath}/${localhostProfile.replace(/\./g, '\\.')}(\\s|$)`));
    const cm = spec.volumes!.find((v) => v.configMap)!;
    const profileMount = install.volumeMounts!.find((m) => m.name === cm.name)!;
    expect(cm.configMap!.items).toEqual([{ key: 'seccomp-bubblewrap.json', path: 'seccomp-bubblewrap.json' }]);
    expect(script).toContain(`cp ${profileMount.mountPath}/seccomp-bubblewrap.json `);
    // The apply instructions create that ConfigMap from the shipped file.
    const text = readFileSync(path.join(DIR, 'node-profiles.yaml'), 'utf8');
    expect(text).toContain(`create configmap ${cm.configMap!.name} \\\n#     --from-file=profiles/seccomp-bubblewrap.json`);
  });

  it('has bubblewrap and the profiles in the image', async () => {
    const dockerfile = await fs.readFile(path.join(DIR, 'Dockerfile'), 'utf8');
    const installs = [...dockerfile.matchAll(/apt-get install[^\n]*/g)].map((m) => m[0]);
    expect(installs.some((line) => /\sbubblewrap\s/.test(line))).toBe(true);
    expect(dockerfile).toContain('COPY profiles ./profiles');
  });
});

describe('the queue exporter script', () => {
  let emu: Emulator;
  let tmp: string;
  beforeAll(async () => {
    if (!existsSync(path.join(REPO, 'dist/index.js')))
      throw new Error('dist/ is missing: run `npm run build` before this test (npm test does)');
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'maw-exporter-'));
    emu = await startEmulator({ mountRoot: tmp, latencyMs: 0 });
  });
  afterAll(async () => {
    await emu?.close();
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('serves the queue depth of the environment and exits 0 on SIGTERM', async () => {
    await emu.createSession({ script: [] });
    await emu.createSession({ script: [] });
    const child = spawn(process.execPath, [path.join(DIR, 'queue-exporter.mjs')], {
      cwd: REPO,
      env: {
        PATH: process.env['PATH'] ?? '',
        ANTHROPIC_BASE_URL: emu.baseURL,
        ANTHROPIC_ENVIRONMENT_ID: emu.environmentId,
        ANTHROPIC_ENVIRONMENT_KEY: emu.environmentKey,
        METRICS_PORT: '0',
        METRICS_HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 20_000;
      let url: string | undefined;
      while (!url) {
        url = /serving (http:\/\/\S+\/metrics)/.exec(out)?.[1];
        if (!url && (Date.now() > deadline || child.exitCode !== null)) throw new Error(`the exporter never said where it serves:\n${out}`);
        if (!url) await new Promise((r) => setTimeout(r, 100));
      }
      const text = await (await fetch(url)).text();
      expect(text).toContain(`maw_work_queue_depth{environment_id="${emu.environmentId}"} 2`);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).not.toContain(emu.environmentKey);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 30_000);
});
