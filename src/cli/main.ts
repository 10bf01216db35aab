#!/usr/bin/env node
// The `managed-agents-worker` executable: argument parsing only; every command calls the library.
import { runCli } from './cli.js';
import { commands } from './commands.js';
import { processIo } from './io.js';

runCli(process.argv.slice(2), processIo(), commands()).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`managed-agents-worker: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
