// `npm run demo`: the CLI's `demo` command (same flags, same exit codes: 5 when an outcome is wrong).
import { runCli } from '../cli/cli.js';
import { demoCommand } from '../cli/demo-command.js';
import { processIo } from '../cli/io.js';

runCli(['demo', ...process.argv.slice(2)], processIo(), [demoCommand]).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`demo crashed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
