import { addApiFlags, apiInputsFrom } from '../worker-flags.js';
import { environmentKeyFrom } from '../credential-flags.js';
import { COMMON_EXIT_ROWS, EXIT } from '../exit-codes.js';
import type { Command } from '../command.js';
import { allPassed, runChecks, type DoctorProbes } from './checks.js';
import { formatChecks } from './format.js';
import { realProbes } from './real-probes.js';

export const DEFAULT_MOUNT_PARENT = '/mnt/memory';

/** Build the doctor command over the given probes (tests pass fakes; the CLI passes the real ones). */
export function doctorCommand(probes: DoctorProbes = realProbes): Command {
  return {
    name: 'doctor',
    summary: 'check this host (mount parent, O_NOFOLLOW, case sensitivity, bash, Node, env, API)',
    description: `Checks this host and prints a pass/fail table with the fix for each failing check:
POSIX and O_NOFOLLOW, the mount parent (exists, writable by this user, case sensitivity),
/bin/bash, the Node version (the SDK's glob tool needs Node 22), the environment
variables, and that the API answers with the environment key (plus clock skew).`,
    environment: [
      ['ANTHROPIC_ENVIRONMENT_ID', 'environment id, when --environment-id is not given'],
      ['ANTHROPIC_ENVIRONMENT_KEY', 'environment key, when --environment-key-file is not given'],
      ['ANTHROPIC_BASE_URL', 'API base URL, when --base-url is not given'],
    ],
    exitCodes: [
      [EXIT.OK, 'every check passed (warnings allowed)'],
      COMMON_EXIT_ROWS.unexpected,
      COMMON_EXIT_ROWS.usage,
      [EXIT.CONFIG, 'the key file named by --environment-key-file could not be read'],
      [EXIT.CHECK_FAILED, 'a check failed; the table says how to fix it'],
    ],
    flags(cmd) {
      cmd.option('--mount-parent <dir>', `folder store folders are created in (default ${DEFAULT_MOUNT_PARENT})`);
      addApiFlags(cmd);
      cmd.option('--offline', 'skip the API and clock checks').option('--json', 'print the results as JSON instead of a table');
    },
    async run(flags, io) {
      const { environmentId, baseURL, defaultHeaders } = apiInputsFrom(flags, io);
      const results = await runChecks(probes, {
        mountParent: (flags['mountParent'] as string | undefined) ?? DEFAULT_MOUNT_PARENT,
        environmentId,
        environmentKey: environmentKeyFrom(flags, io),
        baseURL,
        defaultHeaders,
        offline: flags['offline'] === true,
      });
      io.stdout(
        flags['json'] === true ? JSON.stringify({ ok: allPassed(results), checks: results }, null, 2) + '\n' : formatChecks(results),
      );
      return allPassed(results) ? EXIT.OK : EXIT.CHECK_FAILED;
    },
  };
}
