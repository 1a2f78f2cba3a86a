#!/usr/bin/env bash
# hpc.slurm_k8s slurmd preStop hook (installed as /usr/local/sbin/slurm-k8s-prestop): remove this
# pod's dynamic node from Slurm so that a deleted pod leaves no ghost node behind.
# A DRAINED node is kept, because its pod is being replaced (upgrade, image change, eviction) and
# the StatefulSet brings it back under the same name: deleting it would lose the drain, so the new
# pod would register idle and take jobs in the middle of an upgrade, and an admin's "bad DIMM" drain
# would vanish. Only a drain tagged hpc.slurm_k8s:scale (scale.yml removing the node) deletes it.
# Slurm refuses to delete while a job runs on the node ("Requested nodes are busy"): the scale and
# upgrade playbooks drain first. Retries transient failures for SLURM_K8S_PRESTOP_TIMEOUT seconds (20).
set -euo pipefail
PROG=slurm-k8s-prestop
log() { echo "$PROG: $*" >&2; }
[[ ${SLURM_K8S_DEBUG:-false} == true ]] && set -x

node=${SLURMD_NODENAME:-$(hostname -s)}
if [[ ${SLURMD_DYNAMIC:-true} != true ]]; then
  log "node $node is declared in slurm.conf (SLURMD_DYNAMIC=false): not deleting it"
  exit 0
fi

# State=IDLE+DRAIN ... Reason=hpc.slurm_k8s:upgrade cluster upgrade [root@2026-11-30T02:00:00]
if info=$(scontrol --oneliner show node "$node" 2>/dev/null); then
  state=$(grep -o ' State=[^ ]*' <<<"$info" || true)
  reason=${info#* Reason=}
  [[ $reason == "$info" ]] && reason=""
  if [[ $state == *DRAIN* && $reason != hpc.slurm_k8s:scale* ]]; then
    log "node $node is drained (${reason:-no reason}): keeping it for the pod that replaces this one"
    exit 0
  fi
fi
timeout=${SLURM_K8S_PRESTOP_TIMEOUT:-20}
deadline=$(( $(date +%s) + timeout ))
while :; do
  if out=$(scontrol delete nodename="$node" 2>&1); then
    log "deleted node $node from Slurm"
    exit 0
  fi
  out=${out//$'\n'/ }
  case $out in
    *"Invalid node name"*|*"Unable to find"*|*"not found"*)
      log "node $node is not known to Slurm (already deleted): $out"; exit 0 ;;
  esac
  if (( $(date +%s) >= deadline )); then
    log "ERROR: could not delete node $node within ${timeout}s: $out"
    exit 1
  fi
  log "scontrol delete nodename=$node failed ($out); retrying"
  sleep 2
done
