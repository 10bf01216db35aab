export { Launcher, type LauncherEventMap, type SandboxExit } from './launcher.js';
export { KILL_AFTER_DEFAULT_MS, LAUNCHER_CONCURRENCY_MAX, type LauncherOptions } from './options.js';
export { SANDBOX_BASE_ENV_VARS, SANDBOX_ENV_VARS } from './sandbox-env.js';
