import * as fs from 'node:fs';
import type { SandboxFailureReason } from '../errors.js';

/**
 * Why a sandbox does not start on this host, named from what bubblewrap said and what the host
 * shows of itself, with the fix in the words of where the worker runs (a bare host, a container,
 * a Kubernetes pod). {@link diagnoseSandboxFailure} is pure; {@link readHostFacts} reads the facts.
 */

/** What the host shows of itself that tells one cause from another. */
export interface SandboxHostFacts {
  /** The worker runs in a container (a runtime's marker file, or a Kubernetes pod's variables). */
  container: 'kubernetes' | 'container' | undefined;
  /** The worker itself runs under a seccomp filter (`Seccomp: 2`): a container runtime's profile. */
  workerSeccomp: boolean;
  /** `kernel.unprivileged_userns_clone` (Debian's and older Ubuntu's switch), when the kernel has it. */
  unprivilegedUsernsClone: number | undefined;
  /** `user.max_user_namespaces`. */
  maxUserNamespaces: number | undefined;
  /** `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10 and later), when the kernel has it. */
  apparmorRestrictsUserns: number | undefined;
}

export interface SandboxDiagnosis {
  reason: SandboxFailureReason;
  /** What went wrong, in one sentence. */
  problem: string;
  /** What to change, for where the worker runs. */
  fix: string;
}

/** Where the container page of the documentation is, as the fixes name it. */
const DOCS = 'docs/containers.md';
/** The seccomp profile the package ships, relative to the installed package. */
export const SHIPPED_SECCOMP_PROFILE = 'profiles/seccomp-bubblewrap.json';
const PROFILE_PATH = `node_modules/managed-agents-worker/${SHIPPED_SECCOMP_PROFILE}`;

const PROC_KUBERNETES =
  "spec.hostUsers: false and the container's securityContext.procMount: Unmasked " +
  '(Kubernetes 1.33+, where the UserNamespacesSupport and ProcMountType feature gates are on by default; 1.30-1.32 with both gates enabled; ' +
  'containerd 2.0+ or CRI-O 1.25+, Linux 6.3+)';
const SECCOMP_KUBERNETES =
  'installed on each node under /var/lib/kubelet/seccomp/, as securityContext.seccompProfile: { type: Localhost, localhostProfile: <its path there> }';

const FIX_PROC = {
  kubernetes: `give the pod its own user namespace and an unmasked /proc: ${PROC_KUBERNETES}`,
  container:
    'run the container with an unmasked /proc: podman run --security-opt unmask=ALL, docker run --security-opt systempaths=unconfined ' +
    `(best with a user namespace: podman --userns=auto, dockerd userns-remap); in a Kubernetes pod, ${PROC_KUBERNETES}`,
};

const FIX_SECCOMP = {
  kubernetes:
    `give the container the seccomp profile this package ships (${SHIPPED_SECCOMP_PROFILE}: the calls a container gets plus those bubblewrap needs), ` +
    SECCOMP_KUBERNETES,
  container:
    `run the container with the seccomp profile this package ships: --security-opt seccomp=${PROFILE_PATH} (docker and podman); ` +
    `in a Kubernetes pod, that profile ${SECCOMP_KUBERNETES}`,
};

const FIX_APPARMOR_HOST =
  'allow bubblewrap user namespaces under AppArmor: an AppArmor profile for bwrap granting "userns," (Ubuntu 24.04+ ships one in apparmor-profiles as bwrap-userns-restrict), ' +
  'or sysctl kernel.apparmor_restrict_unprivileged_userns=0';

const FIX_APPARMOR_CONTAINER = {
  kubernetes:
    'give the container an AppArmor profile that allows mount and user namespaces: securityContext.appArmorProfile: { type: Localhost, localhostProfile: managed-agents-worker-bubblewrap } ' +
    '(the profile this package ships in profiles/apparmor-bubblewrap, loaded on each node; Kubernetes 1.30+), or { type: Unconfined }',
  container:
    'run the container with an AppArmor profile that allows mount and user namespaces: --security-opt apparmor=<the profile of profiles/apparmor-bubblewrap, loaded>, or apparmor=unconfined',
};

const FIX_USERNS_HOST = 'allow user namespaces on the host: sysctl user.max_user_namespaces=15000 (it is 0 here)';

/** Decide the cause of a failed start from bubblewrap's words (`problem`) and the host's facts. Pure. */
export function diagnoseSandboxFailure(problem: string, facts: SandboxHostFacts): SandboxDiagnosis {
  const where = facts.container === 'kubernetes' ? 'kubernetes' : 'container';
  const inContainer = facts.container !== undefined;
  const said = `a sandbox did not start (${problem})`;
  const docs = ` (see ${DOCS})`;
  if (/Can't mount proc|mount proc on/i.test(problem)) {
    return {
      reason: 'proc_masked',
      problem: `${said}: the kernel refuses the sandbox a /proc of its own because the worker's /proc has masked paths, as a container runtime sets them up`,
      fix: FIX_PROC[where] + docs,
    };
  }
  if (facts.maxUserNamespaces === 0 || facts.unprivilegedUsernsClone === 0) {
    const knob = facts.maxUserNamespaces === 0 ? 'user.max_user_namespaces is 0' : 'kernel.unprivileged_userns_clone is 0';
    return {
      reason: 'userns_disabled',
      problem: `${said}: user namespaces are turned off on this host (${knob})`,
      fix:
        (facts.maxUserNamespaces === 0
          ? FIX_USERNS_HOST
          : 'allow unprivileged user namespaces on the host: sysctl kernel.unprivileged_userns_clone=1') +
        (inContainer ? ' (a setting of the node, not of the container)' : '') +
        docs,
    };
  }
  const namespaceRefused = /namespace|unshare|clone/i.test(problem) && /Operation not permitted|No permissions/i.test(problem);
  const mountRefused = /(mount|make \/ slave|pivot_root|tmpfs).*(Operation not permitted|Permission denied)/i.test(problem);
  if (facts.apparmorRestrictsUserns === 1 && !inContainer && (/uid map|Permission denied/i.test(problem) || namespaceRefused)) {
    return {
      reason: 'apparmor',
      problem: `${said}: AppArmor restricts unprivileged user namespaces on this host (kernel.apparmor_restrict_unprivileged_userns=1)`,
      fix: FIX_APPARMOR_HOST + docs,
    };
  }
  if (inContainer && facts.workerSeccomp && (namespaceRefused || mountRefused)) {
    return {
      reason: 'seccomp',
      problem: `${said}: the container's seccomp profile refuses the calls bubblewrap makes (unshare, clone of namespaces, mount), as runtime defaults do without CAP_SYS_ADMIN`,
      fix: FIX_SECCOMP[where] + docs,
    };
  }
  if (inContainer && mountRefused) {
    return {
      reason: 'apparmor',
      problem: `${said}: a security module of the container (most often the runtime's default AppArmor profile) refuses mount`,
      fix: FIX_APPARMOR_CONTAINER[where] + docs,
    };
  }
  if (/uid map|gid map|setgroups/i.test(problem)) {
    return {
      reason: 'uid_map',
      problem: `${said}: the sandbox's user namespace got no uid map`,
      fix: inContainer
        ? (where === 'kubernetes'
            ? 'give the pod its own user namespace (spec.hostUsers: false, Kubernetes 1.33+ or the UserNamespacesSupport gate)'
            : 'run the container with a user namespace (podman --userns=auto, dockerd --userns-remap)') + docs
        : "check that the worker may write its user namespace's uid map (a setuid bwrap, or a security module, may refuse it); run bubblewrap as installed by the distribution" +
          docs,
    };
  }
  if (namespaceRefused) {
    return {
      reason: inContainer ? 'seccomp' : 'userns_disabled',
      problem: inContainer
        ? `${said}: the container refuses new namespaces (its seccomp profile, or missing user namespace support)`
        : `${said}: the kernel refuses unprivileged user namespaces`,
      fix: inContainer
        ? `${FIX_SECCOMP[where]}; and ${FIX_PROC[where]}${docs}`
        : `allow unprivileged user namespaces (sysctl user.max_user_namespaces above 0; Debian: kernel.unprivileged_userns_clone=1)${docs}`,
    };
  }
  return {
    reason: 'probe_failed',
    problem: said,
    fix: inContainer
      ? `the container needs an unmasked /proc, a seccomp profile allowing namespaces and mount, and user namespaces: ${FIX_PROC[where]}; ${FIX_SECCOMP[where]}${docs}`
      : `run the doctor command (managed-agents-worker doctor) for the sandbox's rows${docs}`,
  };
}

/** Read the facts {@link diagnoseSandboxFailure} weighs. Never throws. */
export function readHostFacts(env: NodeJS.ProcessEnv = process.env): SandboxHostFacts {
  const status = readOr('/proc/self/status', '');
  const cgroup = readOr('/proc/1/cgroup', '');
  const container =
    env['KUBERNETES_SERVICE_HOST'] !== undefined || /kubepods/.test(cgroup)
      ? 'kubernetes'
      : fs.existsSync('/run/.containerenv') ||
          fs.existsSync('/.dockerenv') ||
          env['container'] !== undefined ||
          /docker|containerd|libpod/.test(cgroup)
        ? 'container'
        : undefined;
  return {
    container,
    workerSeccomp: /^Seccomp:\s*2\s*$/m.test(status),
    unprivilegedUsernsClone: readNumber('/proc/sys/kernel/unprivileged_userns_clone'),
    maxUserNamespaces: readNumber('/proc/sys/user/max_user_namespaces'),
    apparmorRestrictsUserns: readNumber('/proc/sys/kernel/apparmor_restrict_unprivileged_userns'),
  };
}

function readOr(file: string, fallback: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return fallback;
  }
}

function readNumber(file: string): number | undefined {
  const text = readOr(file, '').trim();
  return /^\d+$/.test(text) ? Number(text) : undefined;
}
