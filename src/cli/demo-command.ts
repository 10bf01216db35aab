import type { DemoOptions, DemoResult } from '../demo/run-demo.js';
import type { Command } from './command.js';
import { COMMON_EXIT_ROWS, EXIT } from './exit-codes.js';

/** Runs the demo and reports its verdict; the shipped command loads `runDemo` on first use. */
export type DemoRunner = (options: DemoOptions) => Promise<Pick<DemoResult, 'ok'>>;

// Loaded only here, so the other commands never load the emulator.
const loadAndRunDemo: DemoRunner = async (options) => (await import('../demo/run-demo.js')).runDemo(options);

/** The `demo` command over `runner`: exit 0 when every outcome is right, 5 when any is wrong. */
export function createDemoCommand(runner: DemoRunner): Command {
  return {
    name: 'demo',
    summary: 'run the demo on the embedded emulator (same as npm run demo)',
    description: `Runs everything in-process on the embedded emulator (the same as "npm run demo"): two memory
stores, one scripted session (read, write, an edit that loses to a Console edit, a refused
write into a read-only store, a delete), served by EnvironmentWorker with a 5 s sync interval.
Prints the temp mount root, a live log and a summary table per store. Takes about 20 seconds.
To try "run", "handle" or your own code against the emulator instead, see "emulator".`,
    exitCodes: [
      [EXIT.OK, 'every outcome was right'],
      COMMON_EXIT_ROWS.unexpected,
      COMMON_EXIT_ROWS.usage,
      [EXIT.CHECK_FAILED, 'an outcome was wrong (the summary marks it FAIL)'],
    ],
    flags(cmd) {
      cmd.option('--keep', 'keep the temp folder afterwards');
    },
    async run(flags, io) {
      const result = await runner({ out: io.stdout, keep: flags['keep'] === true });
      return result.ok ? EXIT.OK : EXIT.CHECK_FAILED;
    },
  };
}

export const demoCommand: Command = createDemoCommand(loadAndRunDemo);
