export { Launcher, SANDBOX_ENV_VARS, type LauncherEventMap, type LauncherOptions, type SandboxExit } from './launcher.js';
