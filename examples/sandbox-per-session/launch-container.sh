#!/bin/sh
# Launch command for `managed-agents-worker launch` on a single host: runs `handle` for the claimed
# work item in a fresh container (docker or podman) of the image built from ./Dockerfile, and waits
# until the container has exited, so the launcher's --concurrency bounds running containers.
#
#   docker build -f examples/sandbox-per-session/Dockerfile -t managed-agents-worker-sandbox .
#   managed-agents-worker launch --concurrency 4 \
#     --on-work /path/to/examples/sandbox-per-session/launch-container.sh
#
# Environment variables set by the launcher: ANTHROPIC_WORK_ID, ANTHROPIC_ENVIRONMENT_ID,
# ANTHROPIC_SESSION_ID, ANTHROPIC_BASE_URL, ANTHROPIC_WORK_SECRET (when the item has one) and
# ANTHROPIC_ENVIRONMENT_KEY (only when the item has no usable secret). Set by you, and passed with
# --pass-env NAME since the launcher passes nothing else beyond PATH, HOME and the locale:
#   SANDBOX_IMAGE         the image (default managed-agents-worker-sandbox)
#   SANDBOX_ENGINE        docker or podman (default: podman when installed, else docker)
#   SANDBOX_ENGINE_ARGS   options of the engine itself, before `run` (e.g. docker --context NAME;
#                         podman --root DIR)
#   SANDBOX_RUN_ARGS      more `run` options: limits (--memory 2g --cpus 1 --pids-limit 512), the
#                         network (--network NAME: give it egress to the API only), a runtime
#                         (--runtime runsc)
#   SANDBOX_HANDLE        the command that runs `handle`, for an image or root file system without
#                         the Dockerfile's ENTRYPOINT (default: none, the ENTRYPOINT runs)
#   SANDBOX_NAME_PREFIX   container names are this plus the work id (default maw-)
# The *_ARGS and SANDBOX_HANDLE values are split on spaces (no quoting inside them). With podman,
# SANDBOX_RUN_ARGS='--rootfs' and SANDBOX_IMAGE=/path/to/root:O run a root folder instead of an
# image (the repository's container tests run it so, with SANDBOX_HANDLE set).
#
# Security model: the container is the session's boundary. It holds this one session's files
# (workspace, store folders, state) and nothing of other sessions or of the host (no host mounts);
# its processes see only its own processes. The credential (the work secret, or the environment
# key for an item without a usable secret) goes to `handle` on the container's standard input
# (`--work-secret-file /dev/stdin`), read once at start: it is on no command line, in the
# environment of neither the engine's client nor the container (this script unsets it before it
# starts the client; only this script's own start-up environment, from the launcher, holds it), in
# no image layer and not in `inspect` output (`-e` and `--env-file` values are). The container gets
# no capabilities and no new privileges. The environment key (which could claim other sessions'
# work) reaches a container only for an item without a usable secret.
#
# Ending: the container is removed when it exits (`--rm`, done by the engine even when this script
# or its client is gone). `handle` owns the item (lease, session, stop); this script never stops
# it. If the launcher stops (SIGTERM to this script, or the launcher killed), the container keeps
# running and ends its session by itself; `docker stop` / `podman stop` ends it early, gracefully
# (--stop-timeout 45 gives `handle` its 30 s final sync).
set -eu
# A stop signal before the container is started is acted on once it is: the item was claimed for it.
interrupted=
trap 'interrupted=1' TERM INT

: "${ANTHROPIC_WORK_ID:?ANTHROPIC_WORK_ID is not set: run this script as the --on-work command of managed-agents-worker launch}"
image=${SANDBOX_IMAGE:-managed-agents-worker-sandbox}
engine=${SANDBOX_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1; then engine=podman
  elif command -v docker >/dev/null 2>&1; then engine=docker
  else echo "launch-container.sh: neither podman nor docker is installed; install one or set SANDBOX_ENGINE" >&2; exit 127
  fi
fi
# Container names allow [A-Za-z0-9_.-]; one name per item, so a second delivery of an item whose
# container still runs fails to start instead of running the session twice.
name="${SANDBOX_NAME_PREFIX:-maw-}$(printf '%s' "$ANTHROPIC_WORK_ID" | tr -c 'A-Za-z0-9_.-' '-')"

# The one credential handle needs, then out of the environment: the engine's client and anything
# it starts never hold it.
if [ -n "${ANTHROPIC_ENVIRONMENT_KEY:-}" ]; then
  credential=$ANTHROPIC_ENVIRONMENT_KEY
  credential_flag=--environment-key-file
else
  credential=${ANTHROPIC_WORK_SECRET:-}
  credential_flag=--work-secret-file
fi
unset ANTHROPIC_ENVIRONMENT_KEY ANTHROPIC_WORK_SECRET
if [ -z "$credential" ]; then
  echo "launch-container.sh: item $ANTHROPIC_WORK_ID has neither ANTHROPIC_WORK_SECRET nor ANTHROPIC_ENVIRONMENT_KEY" >&2
  exit 3
fi

# The client runs in the background so that a signal to this script is handled at once (a shell
# runs its traps only between commands), in a session of its own where setsid is installed: the
# launcher signals this script's whole process group, and a client stopped while it creates the
# container leaves it created and never started, holding the item's name. --sig-proxy=false: a
# signal to the client is not passed to the container, whose session runs to its end.
own_session=
if command -v setsid >/dev/null 2>&1; then own_session=setsid; fi
# shellcheck disable=SC2086 # the *_ARGS and SANDBOX_HANDLE values are word lists; own_session may be empty
printf '%s\n' "$credential" | $own_session "$engine" ${SANDBOX_ENGINE_ARGS:-} run -i --rm --sig-proxy=false \
  --name "$name" --stop-timeout 45 --cap-drop ALL --security-opt no-new-privileges \
  -e ANTHROPIC_WORK_ID -e ANTHROPIC_ENVIRONMENT_ID -e ANTHROPIC_SESSION_ID -e ANTHROPIC_BASE_URL \
  ${SANDBOX_RUN_ARGS:-} "$image" ${SANDBOX_HANDLE:-} "$credential_flag" /dev/stdin &
client=$!
credential=
trap 'echo "launch-container.sh: interrupted; container $name keeps running and ends its session by itself" >&2; exit 0' TERM INT
if [ -n "$interrupted" ]; then kill -TERM $$; fi
# The item is finished when the container exits; its exit code is handle's (how the session ended).
status=0
wait "$client" || status=$?
exit "$status"
