#!/usr/bin/env bash
# Build the collection's images and the test database image with Docker, offline (no registry needed):
#   hpc-slurm-k8s/slurm:TAG         images/slurm, target node (slurmd, login; OpenMPI + PMIx)
#   hpc-slurm-k8s/slurm-daemon:TAG  images/slurm, target daemon (slurmctld, slurmdbd)
#   hpc-slurm-k8s/mariadb-test:TAG  tests/images/mariadb (stand-in for the official image)
#   with PORTAL=1 also hpc-slurm-k8s/slurm-notebook:TAG and slurm-portal:TAG (targets notebook and portal)
# TAG defaults to galaxy.yml's version (else "dev"). Safe to re-run: layers come from the cache.
# Environment: IMAGE_PREFIX (hpc-slurm-k8s), BUILD_ARGS (extra `docker build` arguments), SLURM_MAJOR
# (a line of images/slurm/slurm-majors, the first by default: its Debian suite is the base, and the newest
# version of that major in the suite is installed and recorded in the images' labels; any other major fails
# the build).
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

SLURM_MAJOR=${SLURM_MAJOR:-$(awk '!/^#/ && NF { print $1; exit }' "$ROOT/images/slurm/slurm-majors")}
SUITE=$(awk -v major="$SLURM_MAJOR" '$1 == major { print $2 }' "$ROOT/images/slurm/slurm-majors")
if [[ -z $SUITE ]]; then
  log "SLURM_MAJOR=$SLURM_MAJOR is not one of images/slurm/slurm-majors: $(awk '!/^#/ { printf "%s ", $1 }' "$ROOT/images/slurm/slurm-majors")"
  exit 2
fi
BASE_IMAGE=debian:$SUITE-slim
BASE_IMAGE=$BASE_IMAGE SUITE=$SUITE "$HERE/make-base-image.sh"
"$HERE/make-base-image.sh"  # debian:trixie-slim, the test database's base (nothing to do when it exists)
# the exact version, from the suite's own index as the image sees it (its -updates and -security too)
if ! versions=$("$DOCKER" run --rm --network host "$BASE_IMAGE" \
                sh -c 'apt-get update -qq >/dev/null && apt-cache madison slurm-client'); then
  log "could not read the package index of Debian $SUITE (from $BASE_IMAGE)"
  exit 1
fi
SLURM_VERSION=$(awk -v prefix="$SLURM_MAJOR." 'index($3, prefix) == 1 { print $3 }' <<<"$versions" | sort -V | tail -n 1)
if [[ -z $SLURM_VERSION ]]; then
  log "Debian $SUITE carries no slurm-client $SLURM_MAJOR.* (it has: $(awk '{ printf "%s ", $3 }' <<<"$versions"))"
  exit 1
fi
log "Slurm $SLURM_VERSION from Debian $SUITE"

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
slurm_args=(--build-arg SLURM_MAJOR="$SLURM_MAJOR" --build-arg SUITE="$SUITE" --build-arg SLURM_VERSION="$SLURM_VERSION")
build "$PREFIX/slurm:$TAG" "$ROOT/images/slurm" --target node "${slurm_args[@]}"
build "$PREFIX/slurm-daemon:$TAG" "$ROOT/images/slurm" --target daemon "${slurm_args[@]}"
build "$PREFIX/mariadb-test:$TAG" "$ROOT/tests/images/mariadb"
# PORTAL=1: the portal's images too, the hub's and the notebook nodes' (roles/portal). Their Python wheels
# (images/slurm/portal-requirements.txt) are downloaded here, on the host, pip checking each hash: the
# containers of a build reach no package index
if [[ ${PORTAL:-0} == 1 ]]; then
  "${PYTHON:-$ROOT/.venv/bin/python}" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    --only-binary=:all: -r "$ROOT/images/slurm/portal-requirements.txt" -d "$ROOT/images/slurm/portal-wheels"
  build "$PREFIX/slurm-notebook:$TAG" "$ROOT/images/slurm" --target notebook "${slurm_args[@]}"
  build "$PREFIX/slurm-portal:$TAG" "$ROOT/images/slurm" --target portal "${slurm_args[@]}"
fi
log "all images built in $((SECONDS - start)) s (logs in $LOGDIR)"

"$DOCKER" image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' |
  grep -E "^($PREFIX/(slurm|slurm-daemon|slurm-notebook|slurm-portal|mariadb-test):$TAG|$BASE_IMAGE)[[:space:]]" | sort
