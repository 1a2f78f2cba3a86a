#!/usr/bin/env bash
# hpc.slurm_k8s: makes slurmctld's StateSaveLocation startable after slurmctld was killed (SIGKILL, an OOM kill,
# a node lost), before the entrypoint starts slurmctld (installed as /usr/local/libexec/slurm-k8s-slurmctld-state).
#   slurm-k8s-slurmctld-state STATE_DIR SLURM_CONF
#
# Once a cluster has started once, StateSaveLocation holds `clustername`, and from then on slurmctld 25.05+
# refuses to start, restart after restart, when one of the state files below is missing ("fatal: No Assoc usage
# file (.../assoc_usage) to recover"; Slurm's src/*/: clustername_existed && !ignore_state_errors). Two ways a kill
# leaves one missing:
#  1. slurmctld saves a file as NAME.new (fsync'd), renames NAME to NAME.old, then NAME.new to NAME: a kill
#     between the two renames leaves NAME.new and NAME.old but no NAME. NAME.new is then complete (it was
#     fsync'd before the first rename): it is put back as NAME. NAME.old alone (no NAME.new) is the last complete
#     save before that: it is put back, and said to be older.
#  2. Some files are written only at slurmctld's periodic checkpoint (every 300 s) and at a clean shutdown
#     (assoc_usage, resv_state, trigger_state, fed_mgr_state; job_state before the first job): a slurmctld killed
#     in its first five minutes leaves clustername without them. Nothing of such a file was ever on disk, so
#     nothing is lost by starting without it. clustername is moved aside for this start (to
#     clustername.moved-by-slurm-k8s), which makes slurmctld treat the missing files as a first start does;
#     it takes the cluster's id from slurmdbd again (it waits for slurmdbd when it has no id) and writes
#     clustername anew. Not Slurm's -i: that would also start over a file that exists and cannot be read,
#     losing what it holds; here every file that exists is still read with all of slurmctld's checks.
#     A clustername of another ClusterName than slurm.conf's stays, so that slurmctld's own refusal speaks.
set -euo pipefail
PROG=slurm-k8s-slurmctld-state
log() { echo "$PROG: $*" >&2; }
DIR=${1:?usage: $PROG STATE_DIR SLURM_CONF}
SLURM_CONF=${2:?usage: $PROG STATE_DIR SLURM_CONF}
# the files whose absence stops a slurmctld that has run before (Slurm 26.05's fatal()s on clustername_existed)
REQUIRED=(job_state node_state resv_state trigger_state fed_mgr_state assoc_usage)
# every file slurmctld saves with NAME.new/NAME.old (a missing one of these is put back from its copy too)
SAVED=("${REQUIRED[@]}" part_state qos_usage last_tres assoc_mgr_state last_config_lite priority_last_decay_ran
       burst_buffer_lua_state)

for name in "${SAVED[@]}"; do
  file=$DIR/$name
  [[ -e $file ]] && continue
  if [[ -s $file.new && -e $file.old ]]; then
    # between slurmctld's two renames: .new is the newest complete save
    mv "$file.new" "$file"
    log "put $name back from $name.new (slurmctld was killed between saving it and renaming it)"
  elif [[ -s $file.old ]]; then
    cp -p "$file.old" "$file"
    log "WARNING: put $name back from $name.old, slurmctld's save before its last one (the last one is gone)"
  fi
done

[[ -e $DIR/clustername ]] || exit 0   # a first start, or a state directory from before 25.05: nothing is fatal
never_saved=()
for name in "${REQUIRED[@]}"; do
  [[ -e $DIR/$name ]] || never_saved+=("$name")
done
(( ${#never_saved[@]} )) || exit 0
# clustername holds "ClusterName|ClusterID", the name in lower case (slurmctld lowers slurm.conf's)
recorded=$(cut -d'|' -f1 "$DIR/clustername")
configured=$(sed -n 's/^[[:space:]]*[Cc][Ll][Uu][Ss][Tt][Ee][Rr][Nn][Aa][Mm][Ee][[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$SLURM_CONF" | tail -n1)
if [[ ${recorded,,} != "${configured,,}" ]]; then
  log "$DIR/clustername names cluster '$recorded', slurm.conf '$configured': left for slurmctld to refuse"
  exit 0
fi
mv -f "$DIR/clustername" "$DIR/clustername.moved-by-slurm-k8s"
log "WARNING: $DIR has clustername but slurmctld never saved ${never_saved[*]} (it was killed before its first" \
    "checkpoint, 300 s after a first start): clustername moved aside for this start, so that slurmctld starts" \
    "without them (nothing of them was ever on disk) and takes the cluster id from slurmdbd again"
