/**
 * The virtual environment the Python conformance test runs the official Python SDK in: created
 * under `node_modules/.cache/py-conformance` and reused while it holds the pinned version. Run
 * this file directly (`npx tsx test/conformance/python-venv.ts`) to prepare it ahead of the tests.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);

/** The official Python SDK release the test pins. */
export const PYTHON_SDK_PIN = 'anthropic==1.13.0';
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const VENV = path.join(REPO, 'node_modules', '.cache', 'py-conformance', 'venv');
const PYTHON = path.join(VENV, 'bin', 'python');

async function installedVersion(): Promise<string | undefined> {
  if (!fs.existsSync(PYTHON)) return undefined;
  try {
    const { stdout } = await run(PYTHON, ['-c', 'import anthropic; print(anthropic.__version__)']);
    return stdout.trim();
  } catch {
    return undefined;
  }
}

/** The venv's python, with the pinned SDK installed from the package registry (pip's own configuration). */
export async function pythonWithOfficialSdk(): Promise<string> {
  const want = PYTHON_SDK_PIN.split('==')[1];
  if ((await installedVersion()) === want) return PYTHON;
  const system = process.env['PYTHON'] ?? 'python3';
  try {
    fs.rmSync(VENV, { recursive: true, force: true });
    await run(system, ['-m', 'venv', VENV]);
    // No retries on an unreachable index: pip then moves on to the next configured one.
    await run(PYTHON, ['-m', 'pip', 'install', '--disable-pip-version-check', '--retries', '0', '--timeout', '30', PYTHON_SDK_PIN], {
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (e) {
    const err = e as { message?: string; stderr?: string };
    throw new Error(
      `could not prepare the Python conformance venv at ${VENV} (${PYTHON_SDK_PIN}, with ${system}; set PYTHON to another interpreter): ` +
        `${err.message ?? String(e)}\n${(err.stderr ?? '').slice(-2000)}`,
    );
  }
  const got = await installedVersion();
  if (got !== want) throw new Error(`the venv at ${VENV} holds anthropic ${got ?? '(none)'} after installing ${PYTHON_SDK_PIN}`);
  return PYTHON;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(await pythonWithOfficialSdk());
}
