/**
 * A hostile agent in a child process: in a tight loop it swaps folders of a mount for symlinks to
 * an outside folder and back, and drops files into them while they are real. It runs in its own
 * process so the swaps really interleave with the worker's filesystem calls.
 */
import { spawn, type ChildProcess } from 'node:child_process';

const SCRIPT = String.raw`
const fs = require('node:fs');
const [root, outside, ...folders] = process.argv.slice(1);
let swaps = 0, n = 0, stop = false;
process.on('SIGTERM', () => { stop = true; });
function once() {
  for (const rel of folders) {
    const p = root + '/' + rel, held = p + '.held';
    try { fs.renameSync(p, held); } catch { continue; }
    try { fs.symlinkSync(outside, p); swaps++; for (let i = 0; i < 200; i++); fs.unlinkSync(p); } catch {}
    try { fs.renameSync(held, p); } catch {}
    if (++n % 25 === 0) { try { fs.writeFileSync(p + '/agent-' + (n % 7) + '.md', 'agent ' + n); } catch {} }
  }
}
function loop() {
  const until = Date.now() + 20;
  while (Date.now() < until) once();
  if (stop) { process.stdout.write(String(swaps)); process.exit(0); }
  setImmediate(loop);
}
loop();
`;

export interface Swapper {
  /** Stop the loop; resolves with the number of symlinks swapped in. */
  stop(): Promise<number>;
}

export function startSwapper(root: string, outside: string, folders: string[]): Swapper {
  const child: ChildProcess = spawn(process.execPath, ['-e', SCRIPT, root, outside, ...folders], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      return Number(out) || 0;
    },
  };
}
