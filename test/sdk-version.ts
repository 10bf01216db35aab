/**
 * The installed SDK's version, for tests of behaviour that changed between the versions the peer
 * range admits (they check what each version does, never skip one).
 */
import { VERSION } from '@anthropic-ai/sdk/version';

const [major = 0, minor = 0] = VERSION.split('.').map(Number);

/** True when the installed SDK is `1.<minor>` or later. */
export function sdkAtLeast(wantMinor: number): boolean {
  return major > 1 || (major === 1 && minor >= wantMinor);
}

export const SDK_VERSION = VERSION;
