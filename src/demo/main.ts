// `npm run demo`: runs the demo on the embedded emulator and exits non-zero when an outcome is wrong.
import { runDemo } from './run-demo.js';

runDemo({ out: (text) => void process.stdout.write(text), keep: process.argv.includes('--keep') }).then(
  (result) => process.exit(result.ok ? 0 : 5),
  (e: unknown) => {
    process.stderr.write(`demo crashed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
