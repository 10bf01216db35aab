/**
 * `npm run soak [-- --sessions N --seed S --concurrency C --keep]`: the fault soak of our worker on
 * the emulator. Prints one table of counts and every broken invariant; exits 1 when one broke.
 */
import { parseArgs } from 'node:util';
import { runSoak, SOAK_DEFAULTS } from './run-soak.js';
import { formatSoakTable } from './table.js';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: String(SOAK_DEFAULTS.sessions) },
    seed: { type: 'string', default: String(SOAK_DEFAULTS.seed) },
    concurrency: { type: 'string', default: String(SOAK_DEFAULTS.concurrency) },
    keep: { type: 'boolean', default: false },
  },
});

function positiveInt(name: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    process.stderr.write(`--${name} must be a positive integer, got ${JSON.stringify(raw)}\n`);
    process.exit(2);
  }
  return n;
}

const sessions = positiveInt('sessions', values.sessions);
const seed = positiveInt('seed', values.seed);
const concurrency = positiveInt('concurrency', values.concurrency);
process.stdout.write(`soak: ${sessions} sessions, seed ${seed}, concurrency ${concurrency}\n`);
const result = await runSoak({
  sessions,
  seed,
  concurrency,
  keep: values.keep,
  progress: (line) => process.stdout.write(`  ${line}\n`),
});
process.stdout.write(`\n${formatSoakTable(result.stats, result.verdict)}\n\n`);
for (const f of result.stats.itemFailures) process.stdout.write(`failed item ${f}\n`);
for (const v of result.verdict.violations) process.stdout.write(`VIOLATION ${v}\n`);
if (result.keptAt) process.stdout.write(`kept: ${result.keptAt} (mounts, state folder, worker.log)\n`);
const ok = result.verdict.violations.length === 0;
process.stdout.write(`soak ${ok ? 'passed' : 'FAILED'} in ${(result.stats.durationMs / 1000).toFixed(1)} s (seed ${seed})\n`);
process.exit(ok ? 0 : 1);
