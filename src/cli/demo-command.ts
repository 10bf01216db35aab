import type { DemoOptions, DemoResult } from '../demo/run-demo.js';
import type { Command } from './command.js';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.js';
import { parseFlags } from './flags.js';

const HELP = `Usage: managed-agents-worker demo [--keep]

Runs everything in-process on the embedded emulator (the same as "npm run demo"): two memory
stores, one scripted session (read, write, an edit that loses to a Console edit, a refused
write into a read-only store, a delete), served by EnvironmentWorker with a 5 s sync interval.
Prints the temp mount root, a live log and a summary table per store; exits 5 if any outcome
is wrong. Takes about 20 seconds.

Flags:
  --keep       keep the temp folder afterwards
  -h, --help   show this help

${EXIT_CODE_HELP}`;

/** Runs the demo and reports its verdict; the shipped command loads `runDemo` on first use. */
export type DemoRunner = (options: DemoOptions) => Promise<Pick<DemoResult, 'ok'>>;

// Loaded only here, so the other commands never load the emulator.
const loadAndRunDemo: DemoRunner = async (options) => (await import('../demo/run-demo.js')).runDemo(options);

/** The `demo` command over `runner`: exit 0 when every outcome is right, 5 when any is wrong. */
export function createDemoCommand(runner: DemoRunner): Command {
  return {
    name: 'demo',
    summary: 'run the demo on the embedded emulator (same as npm run demo)',
    help: HELP,
    async run(argv, io) {
      const { values } = parseFlags('demo', argv, { keep: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } });
      if (values.help) {
        io.stdout(HELP + '\n');
        return EXIT.OK;
      }
      const result = await runner({ out: io.stdout, keep: values.keep ?? false });
      return result.ok ? EXIT.OK : EXIT.CHECK_FAILED;
    },
  };
}

export const demoCommand: Command = createDemoCommand(loadAndRunDemo);
