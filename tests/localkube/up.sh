#!/usr/bin/env bash
# A working Slurm cluster on this machine in one command (`make up`, after `make deps`): the local
# Kubernetes of tests/localkube, the collection's images, playbooks/site.yml through the Kubernetes API,
# and a first job submitted over SSH as user alice. `make down` (this script with --down) runs
# playbooks/teardown.yml (volumes included) and stops the local Kubernetes.
# Everything it makes lives under /var/lib/hpc-localkube/demo: the variables, alice's SSH key, the
# login pod's host keys (known_hosts) and an ssh config for them (`ssh -F .../ssh_config demo`).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DEMO=${LOCALKUBE_DEMO_DIR:-/var/lib/hpc-localkube/demo}
PORT=${LOCALKUBE_DEMO_SSH_PORT:-30022}
export PATH="$ROOT/.venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$ROOT/.cache/collections"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
log() { printf 'up: %s\n' "$*" >&2; }
die() { printf 'up: ERROR: %s\n' "$*" >&2; exit 1; }

[[ -x $ROOT/.venv/bin/ansible-playbook ]] || die "run 'make deps' first (no $ROOT/.venv)"
KUBE_BIN=$(bash "$HERE/build.sh" --print | sed -n 's/^kubernetes=//p') || die "the local Kubernetes is not built: run 'make deps'"
export PATH="$KUBE_BIN:$PATH" KUBECONFIG=/var/lib/hpc-localkube/admin.kubeconfig
VERSION=$(awk '/^version:/ { print $2 }' "$ROOT/galaxy.yml")

if [[ ${1:-} == --down ]]; then
  if [[ -f $DEMO/vars.json ]] && python3 "$HERE/localkube.py" status >/dev/null 2>&1; then
    log "removing the Slurm cluster (playbooks/teardown.yml, volumes included)"
    ansible-playbook "$ROOT/playbooks/teardown.yml" -e "@$DEMO/vars.json" \
      -e teardown_delete_volumes=true -e teardown_force=true >"$DEMO/teardown.log" ||
      die "teardown failed; see $DEMO/teardown.log"
  fi
  python3 "$HERE/localkube.py" stop
  exit 0
fi

start=$SECONDS
mkdir -p "$DEMO" && chmod 0700 "$DEMO"
log "images (Docker build, then copied into the local cluster's containerd)"
bash "$ROOT/tests/images/start-docker.sh"
bash "$ROOT/tests/images/build-images.sh" "$VERSION" >"$DEMO/images.log" 2>&1 || die "image build failed; see $DEMO/images.log"
python3 "$HERE/localkube.py" start
python3 "$HERE/localkube.py" load-images "hpc-slurm-k8s/slurm:$VERSION" "hpc-slurm-k8s/slurm-daemon:$VERSION" \
  "hpc-slurm-k8s/mariadb-test:$VERSION"

[[ -f $DEMO/alice_ed25519 ]] || ssh-keygen -q -t ed25519 -N "" -C alice@hpc-slurm-k8s-demo -f "$DEMO/alice_ed25519"
python3 - "$DEMO" "$PORT" "$VERSION" <<'PY'
import json, pathlib, sys
demo, port, version = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
(demo / "vars.json").write_text(json.dumps({
    "cluster_name": "demo", "cluster_kubeconfig": "/var/lib/hpc-localkube/admin.kubeconfig",
    "storage_class": "standard", "storage_home_size": "1Gi", "database_storage_size": "1Gi", "slurmctld_state_size": "1Gi",
    # no registry here: the stand-in for the official MariaDB image, built by tests/images/build-images.sh
    "database_image": "hpc-slurm-k8s/mariadb-test:%s" % version,
    "login_service_type": "NodePort", "login_node_port": port,
    # two workers and the daemons share this machine's CPUs, and `make test` runs its clusters beside
    # this one: small CPU requests (the scheduler counts requests, not use), the usual limits
    "slurmd_replicas": 2, "slurmd_cpus": 1, "slurmd_cpu_request": "100m", "slurmd_memory_mib": 1024,
    **{"%s_resources" % role: {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
       for role in ("slurmctld", "slurmdbd", "login")},
    "database_resources": {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
    "config_users": [{"name": "alice", "uid": 2001,
                      "authorized_keys": [(demo / "alice_ed25519.pub").read_text().strip()]}],
}, indent=2) + "\n")
PY
log "deploying Slurm (playbooks/site.yml, log: $DEMO/site.log)"
ansible-playbook "$ROOT/playbooks/site.yml" -e "@$DEMO/vars.json" >"$DEMO/site.log" 2>&1 ||
  { tail -n 30 "$DEMO/site.log" >&2; die "site.yml failed; see $DEMO/site.log"; }
# The login pod's host keys, read once here (a new cluster has new keys: a known_hosts of its own, so
# that an earlier demo's entry never makes ssh refuse), and an ssh config that uses them: host "demo".
for _ in 1 2 3 4 5; do
  ssh-keyscan -p "$PORT" 127.0.0.1 >"$DEMO/known_hosts" 2>/dev/null && [[ -s $DEMO/known_hosts ]] && break
  sleep 2
done
[[ -s $DEMO/known_hosts ]] || die "no SSH host key from the login Service on 127.0.0.1:$PORT; see $DEMO/site.log"
cat >"$DEMO/ssh_config" <<EOF
Host demo
  HostName 127.0.0.1
  Port $PORT
  User alice
  IdentityFile $DEMO/alice_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $DEMO/known_hosts
  StrictHostKeyChecking yes
  LogLevel ERROR
EOF
ssh_alice=(ssh -F "$DEMO/ssh_config" demo)
log "first job: sbatch --wait as alice over SSH"
ssh -F "$DEMO/ssh_config" -o BatchMode=yes demo "srun -N2 hostname && sbatch --wait -o first-job.out --wrap 'echo hello from \$(hostname) as \$(id -un)' >/dev/null && cat first-job.out"
log "Slurm cluster 'demo' up in $((SECONDS - start)) s. Log in with:"
printf '  %s\n' "${ssh_alice[*]}" "export KUBECONFIG=$KUBECONFIG PATH=$KUBE_BIN:\$PATH; kubectl -n slurm-demo get pods" "make down   # remove it again" >&2
