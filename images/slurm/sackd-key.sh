#!/usr/bin/env bash
# hpc.slurm_k8s: auth/slurm's key set for sackd on login (installed as /usr/local/sbin/slurm-k8s-sackd-key).
# sackd runs as SlurmUser: slurmctld addresses its configuration pushes (configless) to SlurmUser, and
# sackd running as root rejects them ("asked to verify token with r_uid=64030 for uid=0"). The mounted key
# set is readable by root only on login, where the site's users log in, so sackd reads a copy of it owned
# by SlurmUser (mode 0600), replaced atomically here. Prints the copy's path (the entrypoint passes it to sackd
# as SLURM_SACK_JWKS). --reload: then SIGHUP sackd, which re-reads the key set (a key rotation runs this).
set -euo pipefail
SOURCE=${SLURM_K8S_ROOT:-/etc/slurm-k8s}/config/slurm.jwks
DIR=/run/slurm-k8s
COPY=$DIR/slurm.jwks
[[ -r $SOURCE ]] || { echo "slurm-k8s-sackd-key: ERROR: no key set at $SOURCE" >&2; exit 1; }
install -d -o slurm -g slurm -m 0700 "$DIR"
install -o slurm -g slurm -m 0600 "$SOURCE" "$COPY.new"
mv -f "$COPY.new" "$COPY"
if [[ ${1:-} == --reload ]]; then
  pkill -HUP -x sackd
fi
echo "$COPY"
