import type { CheckResult, CheckStatus } from './checks.js';

const LABEL: Record<CheckStatus, string> = { pass: 'PASS', warn: 'WARN', fail: 'FAIL', skip: 'SKIP' };

/** The pass/fail table doctor prints: one row per check, then the fix under each row that has one. */
export function formatChecks(results: readonly CheckResult[]): string {
  const titleWidth = Math.max(...results.map((r) => r.title.length), 5);
  const lines = [`${'STATUS'.padEnd(6)}  ${'CHECK'.padEnd(titleWidth)}  DETAIL`];
  for (const r of results) {
    lines.push(`${LABEL[r.status].padEnd(6)}  ${r.title.padEnd(titleWidth)}  ${r.detail}`);
    if (r.fix) lines.push(`${''.padEnd(6)}  ${''.padEnd(titleWidth)}  fix: ${r.fix}`);
  }
  const counts = (s: CheckStatus): number => results.filter((r) => r.status === s).length;
  lines.push('', `${counts('pass')} passed, ${counts('warn')} warnings, ${counts('fail')} failed, ${counts('skip')} skipped`);
  return lines.join('\n') + '\n';
}
