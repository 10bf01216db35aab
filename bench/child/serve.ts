/**
 * The child's side of the protocol: start `run(signal)`, say `ready`, answer `usage` requests,
 * and on `stop` abort the run, wait for it, report the final usage and exit.
 */
import { usageNow, type ChildConfig, type ChildMessage, type ParentMessage, type Usage } from './protocol.js';

export function readConfig(): ChildConfig {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('bench child: expected the configuration JSON as the first argument');
  return JSON.parse(raw) as ChildConfig;
}

function send(msg: ChildMessage): void {
  process.send?.(msg);
}

const MIB = 1024 * 1024;
const PEAK_SAMPLE_MS = 50;

export function serve(run: (signal: AbortSignal) => Promise<unknown>, extra: () => Partial<Usage> = () => ({})): void {
  let atPeak: Usage['atPeak'];
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    if (atPeak === undefined || m.rss / MIB > atPeak.rss) {
      atPeak = {
        rss: m.rss / MIB,
        heapTotal: m.heapTotal / MIB,
        heapUsed: m.heapUsed / MIB,
        external: m.external / MIB,
        arrayBuffers: m.arrayBuffers / MIB,
      };
    }
  }, PEAK_SAMPLE_MS);
  sampler.unref();
  const stop = new AbortController();
  let failure: string | undefined;
  const running = run(stop.signal).catch((e: unknown) => {
    failure = e instanceof Error ? (e.stack ?? e.message) : String(e);
  });
  send({ type: 'ready', usage: usageNow() });
  process.on('message', (msg: ParentMessage) => {
    if (msg.type === 'usage') {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (msg.gc === true && gc !== undefined) gc();
      send({ type: 'usage', id: msg.id, usage: { ...usageNow(), ...extra() } });
    }
    if (msg.type === 'stop') {
      stop.abort();
      void running.then(() => {
        clearInterval(sampler);
        send({
          type: 'stopped',
          usage: { ...usageNow(), ...extra(), ...(atPeak !== undefined ? { atPeak } : {}) },
          ...(failure !== undefined ? { error: failure } : {}),
        });
        process.disconnect?.();
        setTimeout(() => process.exit(0), 50).unref();
      });
    }
  });
}
