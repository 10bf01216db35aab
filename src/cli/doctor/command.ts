import { EXIT, EXIT_CODE_HELP } from '../exit-codes.js';
import { firstSet, parseFlags } from '../flags.js';
import type { Command } from '../command.js';
import { allPassed, runChecks, type DoctorProbes } from './checks.js';
import { formatChecks } from './format.js';
import { realProbes } from './real-probes.js';

export const DEFAULT_MOUNT_PARENT = '/mnt/memory';

const HELP = `Usage: managed-agents-worker doctor [flags]

Checks this host and prints a pass/fail table with the fix for each failing check:
POSIX and O_NOFOLLOW, the mount parent (exists, writable by this user, case sensitivity),
/bin/bash, the Node version (the SDK's glob tool needs Node 22), the environment
variables, and that the API answers with the environment key (plus clock skew).

Flags:
  --mount-parent <dir>      folder store folders are created in (default ${DEFAULT_MOUNT_PARENT})
  --environment-id <id>     default: ANTHROPIC_ENVIRONMENT_ID
  --environment-key <key>   default: ANTHROPIC_ENVIRONMENT_KEY (prefer the variable: flags show in ps)
  --base-url <url>          default: ANTHROPIC_BASE_URL, else https://api.anthropic.com
  --offline                 skip the API and clock checks
  --json                    print the results as JSON instead of a table
  -h, --help                show this help

${EXIT_CODE_HELP}`;

/** Build the doctor command over the given probes (tests pass fakes; the CLI passes the real ones). */
export function doctorCommand(probes: DoctorProbes = realProbes): Command {
  return {
    name: 'doctor',
    summary: 'check this host (mount parent, O_NOFOLLOW, case sensitivity, bash, Node, env, API)',
    help: HELP,
    async run(argv, io) {
      const { values } = parseFlags('doctor', argv, {
        'mount-parent': { type: 'string' },
        'environment-id': { type: 'string' },
        'environment-key': { type: 'string' },
        'base-url': { type: 'string' },
        offline: { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      });
      if (values.help) {
        io.stdout(HELP + '\n');
        return EXIT.OK;
      }
      const results = await runChecks(probes, {
        mountParent: values['mount-parent'] ?? DEFAULT_MOUNT_PARENT,
        environmentId: firstSet(values['environment-id'], io.env['ANTHROPIC_ENVIRONMENT_ID']),
        environmentKey: firstSet(values['environment-key'], io.env['ANTHROPIC_ENVIRONMENT_KEY']),
        baseURL: firstSet(values['base-url'], io.env['ANTHROPIC_BASE_URL']),
        offline: values.offline ?? false,
      });
      io.stdout(values.json ? JSON.stringify({ ok: allPassed(results), checks: results }, null, 2) + '\n' : formatChecks(results));
      return allPassed(results) ? EXIT.OK : EXIT.CHECK_FAILED;
    },
  };
}
