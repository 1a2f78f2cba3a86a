#!/usr/bin/env bash
# Build the local Kubernetes the tests run on (tests/localkube/README.md), from Go modules only:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl, etcd,
#   containerd (+ shim, ctr), crictl, the CNI plugins bridge/host-local/loopback/portmap, CoreDNS,
#   kube-router (NetworkPolicy), our hostPath provisioner, and the pause program.
# Versions come from versions.env. Each component lands in its own directory keyed by its version,
# outside the checkout ($LOCALKUBE_CACHE, default /var/cache/hpc-slurm-k8s):
#   <cache>/bin/<component>-<version>/...     a `.built` stamp marks a complete build
# so a second run builds nothing. Go's module and build caches live under <cache>/go.
# Usage: tests/localkube/build.sh            build what is missing, print where everything is
#        tests/localkube/build.sh --print    only print the paths (exit 1 if something is missing)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$HERE/versions.env"
CACHE=${LOCALKUBE_CACHE:-/var/cache/hpc-slurm-k8s}
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOFLAGS=-mod=mod GOTOOLCHAIN=local
export CGO_ENABLED=0 GOWORK=off
PRINT_ONLY=false
[[ ${1:-} == --print ]] && PRINT_ONLY=true

log() { printf 'kube-build: %s\n' "$*" >&2; }
die() { printf 'kube-build: ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not installed (the machine image has it: check PATH)"
total_start=$SECONDS
built_any=false

# component_dir NAME VERSION -> the cache directory of that build
component_dir() { printf '%s/bin/%s-%s' "$CACHE" "$1" "$2"; }

# wrapper_module DIR MODULE VERSION [EXTRA go.mod LINES]: a module that requires MODULE@VERSION, so
# that `go build MODULE/cmd/x` resolves dependencies as MODULE's own go.mod says (its replace
# directives do not apply to a dependency; those of the wrapper do).
wrapper_module() {
  local dir=$1 module=$2 version=$3 extra=${4:-}
  mkdir -p "$dir"
  printf 'module localkube.invalid/build\n\ngo 1.26\n\nrequire %s %s\n%s\n' "$module" "$version" "$extra" >"$dir/go.mod"
}

# build NAME VERSION SRC_DIR LDFLAGS TAGS OUT:PACKAGE...   (OUT is the binary's file name)
build() {
  local name=$1 version=$2 src=$3 ldflags=$4 tags=$5; shift 5
  local dest
  dest=$(component_dir "$name" "$version")
  if [[ -f $dest/.built ]]; then return; fi
  $PRINT_ONLY && die "$name $version is not built (run tests/localkube/build.sh)"
  local start=$SECONDS logfile="$CACHE/logs/build-$name-$version.log"
  mkdir -p "$dest.tmp" "$CACHE/logs"
  log "building $name $version (log: $logfile)"
  local spec out pkg
  for spec in "$@"; do
    out=${spec%%:*} pkg=${spec#*:}
    if ! (cd "$src" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$dest.tmp/$out" "$pkg") \
        >>"$logfile" 2>&1; then
      tail -n 30 "$logfile" >&2
      die "building $name $version failed at $pkg; full log: $logfile"
    fi
  done
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  date -u +%FT%TZ >"$dest/.built"
  log "built $name $version in $((SECONDS - start)) s"
  built_any=true
}

# --- Kubernetes ---------------------------------------------------------------------------------
# k8s.io/kubernetes requires its staging modules (k8s.io/api, ...) at v0.0.0 and replaces them with
# ./staging paths; the wrapper replaces each with its published v0.<minor>.<patch> instead.
kube_src="$CACHE/src/kubernetes-$KUBE_VERSION"
if [[ ! -f $(component_dir kubernetes "$KUBE_VERSION")/.built ]] && ! $PRINT_ONLY; then
  staging_version=v0.${KUBE_VERSION#v1.}
  mod_file=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [[ -f $mod_file ]] || die "k8s.io/kubernetes@$KUBE_VERSION: no go.mod from the module proxy"
  replaces=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#replace \1 => \1 '"$staging_version"'#p' "$mod_file" |
    while read -r line; do
      # only modules k8s.io/kubernetes itself requires (the sample-* ones are not published)
      grep -qE "^[[:space:]]+$(cut -d' ' -f2 <<<"$line" | sed 's/\./\\./g') v0\.0\.0" "$mod_file" && echo "$line"
    done)
  wrapper_module "$kube_src" k8s.io/kubernetes "$KUBE_VERSION" "$replaces"
fi
kube_info=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" 2>/dev/null | sed -n 's/^[[:space:]]*"Time": "\(.*\)",$/\1/p' || true)
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${kube_info:-1970-01-01T00:00:00Z}"
done
kube_cmds=()
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  kube_cmds+=("$cmd:k8s.io/kubernetes/cmd/$cmd")
done
build kubernetes "$KUBE_VERSION" "$kube_src" "$kube_ldflags" "" "${kube_cmds[@]}"

# --- etcd, containerd, crictl, CNI plugins, CoreDNS, kube-router -------------------------------------
simple() {  # simple NAME VERSION MODULE LDFLAGS TAGS OUT:PACKAGE... (a wrapper module per component)
  local name=$1 version=$2 module=$3; shift 3
  local src="$CACHE/src/$name-$version"
  [[ -f $(component_dir "$name" "$version")/.built ]] || $PRINT_ONLY || wrapper_module "$src" "$module" "$version"
  build "$name" "$version" "$src" "$@"
}
simple etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "" "" etcd:go.etcd.io/etcd/server/v3
simple containerd "$CONTAINERD_VERSION" github.com/containerd/containerd/v2 \
  "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" "no_btrfs no_devmapper no_zfs" \
  containerd:github.com/containerd/containerd/v2/cmd/containerd \
  containerd-shim-runc-v2:github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  ctr:github.com/containerd/containerd/v2/cmd/ctr
simple cri-tools "$CRI_TOOLS_VERSION" sigs.k8s.io/cri-tools \
  "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" "" crictl:sigs.k8s.io/cri-tools/cmd/crictl
cni=()
for plugin in main/bridge main/loopback ipam/host-local meta/portmap; do
  cni+=("${plugin#*/}:github.com/containernetworking/plugins/plugins/$plugin")
done
simple cni-plugins "$CNI_PLUGINS_VERSION" github.com/containernetworking/plugins \
  "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" "" "${cni[@]}"
simple coredns "$COREDNS_VERSION" github.com/coredns/coredns "" "" coredns:github.com/coredns/coredns
simple kube-router "$KUBE_ROUTER_VERSION" github.com/cloudnativelabs/kube-router/v2 \
  "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" "" \
  kube-router:github.com/cloudnativelabs/kube-router/v2/cmd/kube-router

# --- our own hostPath provisioner (tests/localkube/provisioner), keyed by its sources -------------------
prov_key=$(cat "$HERE"/provisioner/go.mod "$HERE"/provisioner/go.sum "$HERE"/provisioner/*.go | sha256sum | cut -c1-12)
build hostpath-provisioner "$prov_key" "$HERE/provisioner" "" "" \
  hostpath-provisioner:localkube.invalid/hostpath-provisioner

# --- the pause program: Kubernetes' own pause.c, static ---------------------------------------------
pause_dir=$(component_dir pause "$KUBE_VERSION")
if [[ ! -f $pause_dir/.built ]]; then
  $PRINT_ONLY && die "pause $KUBE_VERSION is not built (run tests/localkube/build.sh)"
  command -v gcc >/dev/null || die "gcc is needed to build the pause program"
  kube_mod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  mkdir -p "$pause_dir"
  gcc -Os -Wall -Werror -static -DVERSION="$KUBE_VERSION" -o "$pause_dir/pause" "$kube_mod/build/pause/linux/pause.c" ||
    die "building pause from $kube_mod/build/pause/linux/pause.c failed"
  strip "$pause_dir/pause"
  date -u +%FT%TZ >"$pause_dir/.built"
  built_any=true
fi

if $built_any; then log "build finished in $((SECONDS - total_start)) s"; else log "everything already built (0 s of building)"; fi
for pair in "kubernetes $KUBE_VERSION" "etcd $ETCD_VERSION" "containerd $CONTAINERD_VERSION" "cri-tools $CRI_TOOLS_VERSION" \
            "cni-plugins $CNI_PLUGINS_VERSION" "coredns $COREDNS_VERSION" "kube-router $KUBE_ROUTER_VERSION" \
            "hostpath-provisioner $prov_key" "pause $KUBE_VERSION"; do
  # shellcheck disable=SC2086
  printf '%s=%s\n' "${pair%% *}" "$(component_dir $pair)"
done
