/**
 * The installed SDK's version, for tests of behaviour that changed between the versions the peer
 * range admits (they check what each version does, never skip one).
 */
import { VERSION } from '@anthropic-ai/sdk/version';

export const SDK_VERSION = VERSION;

/** True when the installed SDK is `version` (`major.minor.patch`) or later. */
export function sdkAtLeast(version: string): boolean {
  const parts = (v: string): number[] => v.split(/[.-]/).slice(0, 3).map(Number);
  const [a, b] = [parts(SDK_VERSION), parts(version)];
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return true;
}
