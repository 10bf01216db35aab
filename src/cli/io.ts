/**
 * What a CLI command may touch outside its arguments: output streams, the environment and the
 * working directory. Tests pass their own, so commands run in-process without a real terminal.
 */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export function processIo(): CliIo {
  return {
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
    env: process.env,
    cwd: process.cwd(),
  };
}
