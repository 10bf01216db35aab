/**
 * Turns the measurements of every repetition into the benchmark table: one row per compared
 * figure, the median of each side over the repetitions, the median of the per-repetition ratios
 * (ours / official, or ours / floor), its spread, and whether it meets the target.
 */
import type { ChildKind } from './build-children.js';
import type { Metrics } from './scenarios.js';

export interface RowSpec {
  scenario: string;
  metric: string;
  label: string;
  unit: string;
  /**
   * What ours is divided by: the official worker, the floor, ours with the sandbox off, ours with
   * the sandbox's network on the host's, ours with distinct stores where the row's sessions share one, or ours with limits: null.
   */
  against: 'official' | 'floor' | 'unsandboxed' | 'host-network' | 'distinct' | 'unlimited';
  /** The base figure's metric when it is not `metric` (ours with the sandbox off). */
  baseMetric?: string;
  /** Against the floor, ours' figure comes from this metric when the floor job names it otherwise (`floorMs`). */
  oursMetric?: string;
  /** Highest ratio that meets the target (or figure, or difference: see `kind`); `null` when the figure has none. */
  target: number | null;
  /**
   * What the target bounds: `ratio` (default) ours / base; `max` ours' own figure, in `unit`;
   * `plus` ours minus base, in `unit`.
   */
  kind?: 'ratio' | 'max' | 'plus';
}

/**
 * Targets retired for floor-relative ones (the 10 ms mount rows are bound by file creation, the
 * 16-session ratio to the official worker sat below what a bare client reaches on a 2-core host,
 * the peak-RSS ratio below what the process weighs at rest): their rows still print, with no
 * target; the plain-write floor, the queue floor and the RSS-at-ready rows bound the same things.
 */
export const ROWS: RowSpec[] = [
  {
    scenario: 'mount-8x250',
    metric: 'claimToFirstToolMs',
    label: 'claim → first tool call, 8 stores × 250 × 1 KiB',
    unit: 'ms',
    against: 'official',
    target: null,
  },
  {
    scenario: 'mount-8x250-50ms',
    metric: 'claimToFirstToolMs',
    label: 'claim → first tool call, 8 stores × 250 × 1 KiB, 50 ms per answer',
    unit: 'ms',
    against: 'official',
    target: 0.08,
  },
  {
    scenario: 'mount-8x250-50ms',
    metric: 'claimToFirstToolMs',
    oursMetric: 'claimToFirstToolNoneMs',
    label: "the same, ours with sandbox: 'none'",
    unit: 'ms',
    against: 'official',
    target: null,
  },
  {
    scenario: 'mount-8x250-50ms',
    metric: 'floorMs',
    oursMetric: 'mountWallMs',
    label: 'mount wall 8 × 250, 50 ms vs floor (bare client, same listings, as many in flight)',
    unit: 'ms',
    against: 'floor',
    target: null,
  },
  {
    scenario: 'mount-8x250-50ms',
    metric: 'claimToFirstToolMs',
    baseMetric: 'claimToFirstToolNoneMs',
    label: "claim → first tool call, 8 × 250, 50 ms: sandboxed vs sandbox: 'none' (same job)",
    unit: 'ms',
    against: 'unsandboxed',
    target: 1.1,
  },
  {
    scenario: 'sync-200',
    metric: 'firstToLastWriteMs',
    label: 'mid-session sync of 200 new files (first → last write)',
    unit: 'ms',
    against: 'official',
    target: 0.1,
  },
  {
    scenario: 'final-500',
    metric: 'lastResultToStoppedMs',
    label: 'final sync of 500 files (last result → item stopped)',
    unit: 'ms',
    against: 'official',
    target: 0.1,
  },
  {
    scenario: 'queue-16x10',
    metric: 'wallMs',
    label: '16 queued sessions × 10 tool calls, one process (wall)',
    unit: 'ms',
    against: 'official',
    target: null,
  },
  {
    scenario: 'mount-8x1000x8k',
    metric: 'peakRssMiB',
    label: 'peak RSS mounting 8 × 1 000 × 8 KiB',
    unit: 'MiB',
    against: 'official',
    target: null,
  },
  {
    scenario: 'mount-8x1000x8k',
    metric: 'cpuMs',
    label: 'worker CPU for that mount + session',
    unit: 'ms',
    against: 'official',
    target: 0.4,
  },
  {
    scenario: 'mount-1x2000',
    metric: 'claimToFirstToolMs',
    label: 'claim → first tool call, 1 store × 2 000 × 1 KiB',
    unit: 'ms',
    against: 'official',
    target: null,
  },
  {
    scenario: 'idle-sync-2000',
    metric: 'requestsPerSync',
    label: 'idle sync of a 2 000-memory store: requests per sync',
    unit: 'req',
    against: 'official',
    target: 1,
  },
  {
    scenario: 'idle-sync-2000',
    metric: 'cpuMsPerSync',
    label: 'idle sync of a 2 000-memory store: worker CPU per sync interval',
    unit: 'ms',
    against: 'official',
    target: 1,
  },
  {
    scenario: 'mount-1x2000',
    metric: 'floorMs',
    oursMetric: 'mountWallMs',
    label: 'mount wall 1 × 2 000 vs floor (bare client, same listings)',
    unit: 'ms',
    against: 'floor',
    target: null,
  },
  {
    scenario: 'mount-8x250',
    metric: 'floorMs',
    oursMetric: 'mountWallMs',
    label: 'mount wall 8 × 250 vs floor (bare client, same listings)',
    unit: 'ms',
    against: 'floor',
    target: null,
  },
  {
    scenario: 'queue-16x10',
    metric: 'wallMs',
    label: '16 queued sessions vs floor (bare client, same requests)',
    unit: 'ms',
    against: 'floor',
    target: 1.5,
  },
  {
    scenario: 'mount-1x2000',
    metric: 'floorWriteMs',
    oursMetric: 'mountWallMs',
    label: 'mount wall 1 × 2 000 vs plain-write floor (same listings, each file written once)',
    unit: 'ms',
    against: 'floor',
    target: 1.25,
  },
  {
    scenario: 'mount-8x250',
    metric: 'floorWriteMs',
    oursMetric: 'mountWallMs',
    label: 'mount wall 8 × 250 vs plain-write floor (same listings, each file written once)',
    unit: 'ms',
    against: 'floor',
    target: 1.25,
  },
  {
    scenario: 'mount-8x250',
    metric: 'readyRssMiB',
    label: 'RSS at ready (modules loaded, worker built)',
    unit: 'MiB',
    against: 'official',
    kind: 'plus',
    target: 8,
  },
  {
    scenario: 'mount-2x2000x64k',
    metric: 'rssGrowthMiB',
    label: 'peak RSS − RSS at ready, mount of 2 × 2 000 × 64 KiB (250 MiB)',
    unit: 'MiB',
    against: 'official',
    target: 0.5,
  },
  {
    scenario: 'mount-caps',
    metric: 'peakRssMiB',
    label: 'peak RSS, a session at the caps 8 × 2 000 × 100 KiB (--caps)',
    unit: 'MiB',
    against: 'official',
    kind: 'max',
    target: 286,
  },
  {
    scenario: 'sessions-plateau',
    metric: 'rssGrowthMiB',
    label: 'RSS growth from session 50 to the last (--sessions, default 500; 5 tool calls × 64 KiB output each)',
    unit: 'MiB',
    against: 'official',
    kind: 'max',
    target: 19,
  },
  {
    scenario: 'warm-2000x10',
    metric: 'claimToFirstToolMs',
    label: 'second session of an unchanged 2 000-memory store (10 folders), same worker, 50 ms',
    unit: 'ms',
    against: 'official',
    target: 0.06,
  },
  {
    scenario: 'warm-2000x10-ro',
    metric: 'claimToFirstToolMs',
    label: 'the same, the store attached read-only (ours: its cached files linked, not copied)',
    unit: 'ms',
    against: 'official',
    target: 0.06,
  },
  {
    scenario: 'warm-2000x10',
    metric: 'contentRequests',
    label: 'that second session: requests carrying content (full pages, retrieves)',
    unit: 'req',
    against: 'official',
    target: 0,
  },
  {
    scenario: 'warm-flat-2000',
    metric: 'claimToFirstToolMs',
    label: 'second session of an unchanged flat store (1 folder × 2 000), same worker, 50 ms',
    unit: 'ms',
    against: 'official',
    target: 0.25,
  },
  {
    scenario: 'mount-flat-2000',
    metric: 'claimToFirstToolMs',
    label: 'claim → first tool call, cold flat store (1 folder × 2 000), 50 ms',
    unit: 'ms',
    against: 'official',
    target: null,
  },
  {
    scenario: 'mount-flat-2000',
    metric: 'floorMs',
    oursMetric: 'mountWallMs',
    label: 'mount wall, cold flat store vs floor (one cursor, 100 pages of 20), 50 ms',
    unit: 'ms',
    against: 'floor',
    target: null,
  },
  {
    scenario: 'queue-16x10',
    metric: 'cpuMs',
    label: '16 queued sessions: worker CPU vs floor (bare client, same requests)',
    unit: 'ms',
    against: 'floor',
    target: null,
  },
  {
    scenario: 'shared-store-8',
    metric: 'wallSharedMs',
    label:
      '8 sessions, each attaching one shared read-only store of 300 memories plus a store of its own, six 0.3 s tool calls each, ours at concurrency 8',
    unit: 'ms',
    against: 'official',
    target: null,
  },
  {
    scenario: 'shared-store-8',
    metric: 'wallDistinctMs',
    label: 'the same with eight distinct stores (the parallel floor)',
    unit: 'ms',
    against: 'official',
    target: null,
  },
  {
    scenario: 'shared-store-8',
    metric: 'wallSharedMs',
    baseMetric: 'wallDistinctMs',
    label: '8 sessions, one shared store vs eight distinct stores (wall, ours)',
    unit: 'ms',
    against: 'distinct',
    target: 1.15,
  },
  {
    scenario: 'queue-16x10-sandbox',
    metric: 'wallOnMs',
    baseMetric: 'wallOffMs',
    label: '16 queued sessions, sandbox on vs off (wall)',
    unit: 'ms',
    against: 'unsandboxed',
    target: 1.2,
  },
  {
    scenario: 'queue-16x10-sandbox',
    metric: 'cpuOnMs',
    baseMetric: 'cpuOffMs',
    label: '16 queued sessions, sandbox on vs off (CPU, tool hosts included)',
    unit: 'ms',
    against: 'unsandboxed',
    target: 1.2,
  },
  {
    scenario: 'queue-16x10-sandbox',
    metric: 'pssPerSandboxMiB',
    baseMetric: 'rssOffMiB',
    label: 'memory one sandboxed session adds (PSS of its processes) vs the unsandboxed worker peak RSS',
    unit: 'MiB',
    against: 'unsandboxed',
    target: null,
  },
  ...[8, 32].flatMap((n): RowSpec[] => [
    {
      scenario: `idle-sessions-${n}`,
      metric: 'pssPerSessionMiB',
      baseMetric: 'workerRssNoneMiB',
      label: `${n} idle sandboxed sessions at once: PSS one adds (its sandbox's processes) vs the worker's RSS with sandbox: 'none'`,
      unit: 'MiB',
      against: 'unsandboxed',
      kind: 'max',
      target: 8,
    },
    {
      scenario: `idle-sessions-${n}`,
      metric: 'rssPerSessionMiB',
      baseMetric: 'workerRssNoneMiB',
      label: `${n} idle sandboxed sessions at once: RSS of one's processes (shared pages counted in each)`,
      unit: 'MiB',
      against: 'unsandboxed',
      target: null,
    },
    {
      scenario: `idle-sessions-${n}`,
      metric: 'workerRssMiB',
      baseMetric: 'workerRssNoneMiB',
      label: `the worker's RSS with those ${n} sessions idle, sandboxed vs sandbox: 'none'`,
      unit: 'MiB',
      against: 'unsandboxed',
      target: null,
    },
  ]),
  {
    scenario: 'sandbox-start-proxy',
    metric: 'wallProxyMs',
    baseMetric: 'wallHostMs',
    label: "16 sessions' sandboxes, network through the egress proxy vs network 'host' (wall)",
    unit: 'ms',
    against: 'host-network',
    target: 1.25,
  },
  {
    scenario: 'sandbox-start-proxy',
    metric: 'cpuProxyMs',
    baseMetric: 'cpuHostMs',
    label: "16 sessions' sandboxes, network through the egress proxy vs network 'host' (CPU, tool hosts included)",
    unit: 'ms',
    against: 'host-network',
    target: 1.25,
  },
  {
    scenario: 'proxy-download-100m',
    metric: 'proxySecPer100MiB',
    baseMetric: 'directSecPer100MiB',
    label:
      "100 MiB downloaded by curl in a sandbox, through the egress proxy vs direct, unshaped veth: the proxy path's ceiling (s per 100 MiB)",
    unit: 's',
    against: 'host-network',
    target: null,
  },
  {
    scenario: 'proxy-download-100m',
    metric: 'proxyCpuSecPer100MiB',
    baseMetric: 'proxySecPer100MiB',
    label: 'CPU of the proxy path (worker + tool host) per 100 MiB vs its wall, unshaped veth (s; ratio = cores busy)',
    unit: 's',
    against: 'host-network',
    kind: 'max',
    target: null,
  },
  {
    scenario: 'proxy-download-100m-1gbit',
    metric: 'proxySecPer100MiB',
    baseMetric: 'directSecPer100MiB',
    label:
      '100 MiB downloaded by curl in a sandbox, through the egress proxy vs direct, link shaped to 1 Gbit/s (s per 100 MiB; ≤ 1.25 is ≥ 0.8x the rate)',
    unit: 's',
    against: 'host-network',
    target: 1.25,
  },
  {
    scenario: 'proxy-download-100m-1gbit',
    metric: 'proxyCpuSecPer100MiB',
    baseMetric: 'proxySecPer100MiB',
    label: 'CPU of the proxy path (worker + tool host) per 100 MiB vs its wall, link shaped to 1 Gbit/s (s; ratio = cores busy)',
    unit: 's',
    against: 'host-network',
    kind: 'max',
    target: null,
  },
  {
    scenario: 'sandbox-start-limits',
    metric: 'firstCallLimitsMs',
    baseMetric: 'firstCallUnlimitedMs',
    label: "a session's first call (its sandbox's start), default limits (cgroup, sized tmpfs, rlimits) vs limits: null",
    unit: 'ms',
    against: 'unlimited',
    target: 1.1,
  },
];

/** Measurements of one scenario in one repetition, by child. */
export type RepResult = Partial<Record<ChildKind, Metrics>>;

export interface Row {
  label: string;
  unit: string;
  against: 'official' | 'floor' | 'unsandboxed' | 'host-network' | 'distinct' | 'unlimited';
  /** Median of the official worker (or of the floor, for a floor row). */
  base: number;
  ours: number;
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  target: number | null;
  kind: 'ratio' | 'max' | 'plus';
  /** What the target is held against (the ratio, ours' figure, or ours minus base). */
  judged: number;
  /** `null` when the row has no target or was not measured. */
  met: boolean | null;
  samples: { base: number[]; ours: number[] };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function buildRows(results: Record<string, RepResult[]>): Row[] {
  return ROWS.map((spec) => {
    const reps = results[spec.scenario] ?? [];
    const baseKind: ChildKind =
      spec.against === 'floor'
        ? 'floor'
        : spec.against === 'unsandboxed' || spec.against === 'host-network' || spec.against === 'distinct' || spec.against === 'unlimited'
          ? 'ours'
          : 'official';
    const base = reps.map((r) => r[baseKind]?.[spec.baseMetric ?? spec.metric] ?? NaN);
    const ours = reps.map((r) => r.ours?.[spec.oursMetric ?? spec.metric] ?? NaN);
    const ratios = reps.map((_, i) => ours[i]! / base[i]!);
    const ratio = median(ratios);
    const kind = spec.kind ?? 'ratio';
    // The figure the target bounds, per repetition: the ratio, ours' own figure, or the difference.
    const judged = kind === 'ratio' ? ratio : kind === 'max' ? median(ours) : median(reps.map((_, i) => ours[i]! - base[i]!));
    return {
      kind,
      judged,
      label: spec.label,
      unit: spec.unit,
      against: spec.against,
      base: median(base),
      ours: median(ours),
      ratio,
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
      target: spec.target,
      met: spec.target === null || !Number.isFinite(judged) ? null : judged <= spec.target,
      samples: { base, ours },
    };
  });
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  if (Math.abs(n) >= 100) return String(Math.round(n));
  return n.toFixed(1);
}

/** The table as Markdown. */
export function formatTable(rows: Row[]): string {
  const lines = [
    '| scenario | official | ours | ratio (spread) | target | |',
    '|---|---:|---:|---:|---:|:-:|',
    ...rows.map((r) => {
      const base =
        r.against === 'official'
          ? `${fmt(r.base)} ${r.unit}`
          : `${fmt(r.base)} ${r.unit} (${r.against === 'floor' ? 'floor' : r.against === 'host-network' ? "network 'host'" : r.against === 'distinct' ? 'ours, distinct stores' : r.against === 'unlimited' ? 'limits: null' : 'sandbox off'})`;
      const ratio = Number.isFinite(r.ratio) ? `${r.ratio.toFixed(2)} (${r.ratioMin.toFixed(2)}–${r.ratioMax.toFixed(2)})` : 'n/a';
      const target =
        r.target === null
          ? '—'
          : r.kind === 'max'
            ? `≤ ${fmt(r.target)} ${r.unit}`
            : r.kind === 'plus'
              ? `≤ ${r.against} + ${fmt(r.target)} ${r.unit}`
              : `≤ ${r.target.toFixed(2)}`;
      const mark = r.met === null ? '·' : r.met ? '✓' : '✗';
      return `| ${r.label} | ${base} | ${fmt(r.ours)} ${r.unit} | ${ratio} | ${target} | ${mark} |`;
    }),
  ];
  return lines.join('\n');
}
