#!/usr/bin/env bash
# Install everything `make test` needs on a fresh Debian 12 machine, as root. Idempotent: a second
# run only checks. Nothing here is needed to USE the collection; see README "Requirements".
#   - Debian packages: Slurm 22.05 daemons for tier T2; Docker + debootstrap to build the images, and
#     what the local Kubernetes needs on the host (runc, iptables, ipset, a C compiler for pause)
#   - a venv (.venv) with the pinned Python tools (tests/ci/requirements.txt + constraints.txt), and
#     .venv-checkov for checkov (tests/ci/requirements-checkov.txt; its pins clash with ansible-lint's)
#   - kubernetes.core without Galaxy: extracted from the pinned `ansible`
#     wheel on PyPI into .cache/collections
#   - a pip bootstrap script for ansible-test, which otherwise downloads one from a host we
#     cannot reach
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE="$ROOT/.cache"
VENV="$ROOT/.venv"
# The `ansible` community package release whose wheel carries the collections we test against
# (12.3.0: kubernetes.core 6.2.0).
ANSIBLE_WHEEL_VERSION=12.3.0
COLLECTIONS_FROM_WHEEL=(kubernetes/core)
APT_PACKAGES=(
  slurmctld slurmd slurm-client slurmdbd munge mariadb-server   # T2: real Slurm 22.05 on the host
  docker.io debootstrap                                          # images: Docker, offline base image
  runc iptables ipset iproute2 openssl gcc libc6-dev             # T3: the local Kubernetes (tests/localkube)
  rsync git unzip python3-venv openssh-client
  chromium chromium-driver                                       # T3: the portal in a real browser (Selenium)
)

log() { printf 'bootstrap: %s\n' "$*"; }

install_debian_packages() {
  local missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && { log "Debian packages present"; return; }
  log "installing Debian packages: ${missing[*]}"
  # Packages must not start their services: the tests start each daemon themselves.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || log "apt-get update reported errors (third-party lists?); continuing with Debian's"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
  trap - EXIT
}

install_venv() {
  local stamp="$VENV/.requirements.sha256"
  local want
  want=$(cat "$ROOT/tests/ci/requirements.txt" "$ROOT/tests/ci/constraints.txt" | sha256sum | cut -d' ' -f1)
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    log "venv up to date"; return
  fi
  log "creating venv $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/pip" install -q --disable-pip-version-check \
    -r "$ROOT/tests/ci/requirements.txt" -c "$ROOT/tests/ci/constraints.txt"
  echo "$want" > "$stamp"
}

install_checkov_venv() {
  # checkov pins packaging<24, which the main venv cannot hold (ansible-lint, molecule): own venv.
  local venv="$ROOT/.venv-checkov" stamp="$ROOT/.venv-checkov/.requirements.sha256" want
  want=$(sha256sum "$ROOT/tests/ci/requirements-checkov.txt" | cut -d' ' -f1)
  if [ -x "$venv/bin/checkov" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    log "checkov venv up to date"; return
  fi
  log "creating venv $venv (checkov)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/tests/ci/requirements-checkov.txt"
  echo "$want" > "$stamp"
}

install_collections() {
  local dest="$CACHE/collections/ansible_collections"
  local stamp="$dest/.from-ansible-$ANSIBLE_WHEEL_VERSION"
  if [ ! -f "$stamp" ]; then
    log "extracting ${COLLECTIONS_FROM_WHEEL[*]} from ansible==$ANSIBLE_WHEEL_VERSION"
    local wheels="$CACHE/wheels"
    mkdir -p "$wheels" "$dest"
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps -d "$wheels" "ansible==$ANSIBLE_WHEEL_VERSION"
    local patterns=()
    for coll in "${COLLECTIONS_FROM_WHEEL[@]}"; do patterns+=("ansible_collections/$coll/*"); done
    rm -rf "${COLLECTIONS_FROM_WHEEL[@]/#/$dest/}"
    unzip -q -o "$wheels/ansible-$ANSIBLE_WHEEL_VERSION-py3-none-any.whl" "${patterns[@]}" -d "$CACHE/collections"
    touch "$stamp"
  fi
  # Our own collection, by the path Ansible resolves `hpc.slurm_k8s` from.
  mkdir -p "$dest/hpc"
  ln -sfn "$ROOT" "$dest/hpc/slurm_k8s"
  log "collections in $CACHE/collections: $(cd "$dest" && echo */*)"
}

install_pip_bootstrap() {
  # ansible-test bootstraps pip in its sanity venvs from a script it downloads from a host that is
  # not reachable here; this stand-in uses ensurepip and then pip itself (PyPI is reachable).
  local cache=~/.ansible/test/cache
  mkdir -p "$cache"
  for version in 24_2 24_3 25_0 25_1; do
    cat > "$cache/get_pip_$version.py" <<'PY'
"""Offline stand-in for get-pip.py used by ansible-test: ensurepip, then pip installs the rest."""
import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")  # get-pip.py's own options, unknown to pip

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
subprocess.check_call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check"] + args)
PY
  done
}

install_debian_packages
install_venv
install_checkov_venv
install_collections
install_pip_bootstrap
log "done"
