#!/usr/bin/env bash
# Build the collection's images and the test database image with Docker, offline (no registry needed):
#   hpc-slurm-k8s/slurm:TAG         images/slurm, target node (slurmd, login; OpenMPI + PMIx)
#   hpc-slurm-k8s/slurm-daemon:TAG  images/slurm, target daemon (slurmctld, slurmdbd)
#   hpc-slurm-k8s/mariadb-test:TAG  tests/images/mariadb (stand-in for the official image)
# TAG defaults to galaxy.yml's version (else "dev"). Safe to re-run: layers come from the cache.
# Environment: IMAGE_PREFIX (hpc-slurm-k8s), BUILD_ARGS (extra `docker build` arguments).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DOCKER=/usr/bin/docker
PREFIX=${IMAGE_PREFIX:-hpc-slurm-k8s}
log() { echo "build-images: $*" >&2; }

TAG=${1:-}
if [[ -z $TAG ]]; then
  if [[ -f $ROOT/galaxy.yml ]]; then
    TAG=$(awk -F: '/^version[[:space:]]*:/ { v=$2; gsub(/[[:space:]"'\'']/, "", v); print v; exit }' "$ROOT/galaxy.yml")
  fi
  TAG=${TAG:-dev}
fi
REVISION=$(git -C "$ROOT" rev-parse --verify -q HEAD 2>/dev/null || echo unknown)

# one build at a time (parallel test workers each build their tag): the base image is made once
exec 9>/run/lock/hpc-slurm-k8s-build-images.lock
flock 9
# (fd 9 closed: a dockerd started here would inherit the lock and hold it for as long as it runs)
"$HERE/start-docker.sh" 9>&-
"$HERE/make-base-image.sh"

export DOCKER_BUILDKIT=1
# shellcheck disable=SC2206
extra=(${BUILD_ARGS:-})
build() {
  local name=$1 ctx=$2; shift 2
  local start=$SECONDS
  log "building $name"
  if ! "$DOCKER" build --progress=plain "${extra[@]}" --build-arg VERSION="$TAG" \
        --build-arg REVISION="$REVISION" -t "$name" "$@" "$ctx" >"$LOGDIR/${name//[\/:]/_}.log" 2>&1; then
    log "FAILED to build $name; last lines of $LOGDIR/${name//[\/:]/_}.log:"
    tail -n 40 "$LOGDIR/${name//[\/:]/_}.log" >&2
    exit 1
  fi
  log "built $name in $((SECONDS - start)) s"
}
LOGDIR=${BUILD_LOG_DIR:-$(mktemp -d /tmp/build-images.XXXXXX)}
mkdir -p "$LOGDIR"

start=$SECONDS
build "$PREFIX/slurm:$TAG" "$ROOT/images/slurm" --target node
build "$PREFIX/slurm-daemon:$TAG" "$ROOT/images/slurm" --target daemon
build "$PREFIX/mariadb-test:$TAG" "$ROOT/tests/images/mariadb"
log "all images built in $((SECONDS - start)) s (logs in $LOGDIR)"

"$DOCKER" image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' |
  grep -E "^($PREFIX/(slurm|slurm-daemon|mariadb-test):$TAG|debian:trixie-slim)[[:space:]]" | sort
