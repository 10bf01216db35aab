#!/bin/sh
# Launch command for `managed-agents-worker launch`: creates one Kubernetes Job for the claimed
# work item and waits until it has finished, so the launcher's --concurrency bounds running Jobs.
#
#   managed-agents-worker launch --concurrency 50 \
#     --pass-env SANDBOX_IMAGE --pass-env KUBE_NAMESPACE \
#     --pass-env KUBERNETES_SERVICE_HOST --pass-env KUBERNETES_SERVICE_PORT \
#     --on-work /path/to/examples/sandbox-per-session/launch.sh
#
# Environment variables set by the launcher: ANTHROPIC_WORK_ID, ANTHROPIC_ENVIRONMENT_ID,
# ANTHROPIC_SESSION_ID, ANTHROPIC_BASE_URL, ANTHROPIC_WORK_SECRET (when the item has one) and
# ANTHROPIC_ENVIRONMENT_KEY (only when the item has no usable secret). Set by you, and passed by
# name since the launcher passes nothing else beyond PATH, HOME and the locale: SANDBOX_IMAGE (the
# image built from ./Dockerfile), KUBE_NAMESPACE (default: current), and what kubectl needs to
# reach the cluster (KUBECONFIG, or KUBERNETES_SERVICE_HOST/PORT inside a pod).
#
# Security model: the work secret (and, for an item without one, the environment key) goes into a
# per-item Secret owned by the Job (deleted with it), never onto a command line or into the Job
# spec. The Job's `handle` owns the item (lease, session, stop); this script never stops an item.
# If this script is interrupted (launcher shutdown), the Job keeps running in the cluster and
# finishes its session by itself.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
ns_flag=${KUBE_NAMESPACE:+--namespace=$KUBE_NAMESPACE}
: "${SANDBOX_IMAGE:?set SANDBOX_IMAGE to the image built from examples/sandbox-per-session/Dockerfile}"

# Job names must be DNS labels: lowercase, '-' instead of '_'.
JOB_NAME="maw-$(printf '%s' "$ANTHROPIC_WORK_ID" | tr 'A-Z_' 'a-z-')"
export JOB_NAME SANDBOX_IMAGE

envsubst '${JOB_NAME} ${SANDBOX_IMAGE} ${ANTHROPIC_WORK_ID} ${ANTHROPIC_ENVIRONMENT_ID} ${ANTHROPIC_SESSION_ID} ${ANTHROPIC_BASE_URL}' \
  < "$here/k8s-job.yaml" | kubectl apply $ns_flag -f -
uid=$(kubectl get job $ns_flag "$JOB_NAME" -o jsonpath='{.metadata.uid}')

# The per-item Secret, owned by the Job so Kubernetes deletes it with the Job. The pod waits for it.
kubectl apply $ns_flag -f - <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: ${JOB_NAME}
  ownerReferences:
    - { apiVersion: batch/v1, kind: Job, name: ${JOB_NAME}, uid: ${uid} }
type: Opaque
stringData:
  work-secret: "${ANTHROPIC_WORK_SECRET:-}"
${ANTHROPIC_ENVIRONMENT_KEY:+  environment-key: \"$ANTHROPIC_ENVIRONMENT_KEY\"}
YAML

# Wait for the Job to finish (complete or failed); the item is finished when the sandbox exits.
trap 'echo "launch.sh: interrupted; Job $JOB_NAME keeps running and ends its session by itself" >&2; exit 0' TERM INT
while :; do
  state=$(kubectl get job $ns_flag "$JOB_NAME" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type} {end}' 2>/dev/null || true)
  case "$state" in
    *Complete*) exit 0 ;;
    *Failed*) echo "launch.sh: Job $JOB_NAME failed; see: kubectl logs job/$JOB_NAME" >&2; exit 1 ;;
  esac
  sleep 5
done
