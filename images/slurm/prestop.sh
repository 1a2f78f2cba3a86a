#!/usr/bin/env bash
# hpc.slurm_k8s slurmd preStop hook (installed as /usr/local/sbin/slurm-k8s-prestop): remove this
# pod's dynamic node from Slurm so that a deleted pod leaves no ghost node behind.
# Slurm refuses while a job runs on the node ("Requested nodes are busy"): the scale and upgrade
# playbooks drain first. Retries transient failures for SLURM_K8S_PRESTOP_TIMEOUT seconds (20).
set -euo pipefail
PROG=slurm-k8s-prestop
log() { echo "$PROG: $*" >&2; }
[[ ${SLURM_K8S_DEBUG:-false} == true ]] && set -x

node=${SLURMD_NODENAME:-$(hostname -s)}
if [[ ${SLURMD_DYNAMIC:-true} != true ]]; then
  log "node $node is declared in slurm.conf (SLURMD_DYNAMIC=false): not deleting it"
  exit 0
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
