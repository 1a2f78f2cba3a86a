#!/usr/bin/env bash
# Build an offline stand-in for the official `debian:<suite>-slim` image (no registry is reachable
# from the test machines): debootstrap a minbase suite (trixie by default) from the host's Debian
# mirror, slim it the way the official slim variant is slimmed (no docs/man/locales, no apt caches or
# lists, the same apt/dpkg snippets), and `docker import` it as debian:<suite>-slim.
#
# Idempotent: exits 0 at once if the image exists. Environment:
#   DEBIAN_MIRROR   mirror URI (default: the host's apt sources, else http://deb.debian.org/debian)
#   BASE_IMAGE      tag to create (default debian:trixie-slim)
#   SUITE           Debian suite (default trixie; a suite newer than the host's debootstrap knows, such as
#                   forky on Debian 12, is made with the script of sid, as debootstrap does for testing)
set -euo pipefail

DOCKER=/usr/bin/docker
BASE_IMAGE=${BASE_IMAGE:-debian:trixie-slim}
SUITE=${SUITE:-trixie}
log() { echo "make-base-image: $*" >&2; }

if "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  log "$BASE_IMAGE exists, nothing to do"
  exit 0
fi

# --- mirror: from the host's apt sources (deb822 first, then one-line format) -----------------
host_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    # first URIs: line of a stanza whose URI is not a security archive
    uri=$(awk 'tolower($1)=="uris:" { for (i=2;i<=NF;i++) if ($i !~ /security/) { print $i; exit } }' "$f")
    [[ -n $uri ]] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r $f ]] || continue
    uri=$(awk '$1=="deb" { u=$2; if (u ~ /^\[/) { for (i=2;i<=NF;i++) if ($i ~ /\]$/) { u=$(i+1); break } }
                           if (u !~ /security/) { print u; exit } }' "$f")
    [[ -n $uri ]] && { echo "$uri"; return; }
  done
  echo http://deb.debian.org/debian
}
MIRROR=${DEBIAN_MIRROR:-$(host_mirror)}
MIRROR=${MIRROR%/}
# security archive: same host, "-security" path (deb.debian.org/debian -> deb.debian.org/debian-security)
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-${MIRROR}-security}

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

WORK=$(mktemp -d "/var/tmp/$SUITE-rootfs.XXXXXX")
cleanup() { rm -rf --one-file-system "$WORK"; }
trap cleanup EXIT
ROOT=$WORK/rootfs

log "debootstrap --variant=minbase $SUITE from $MIRROR (takes a minute or two)"
start=$(date +%s)
script=()
[[ -e /usr/share/debootstrap/scripts/$SUITE ]] || script=(/usr/share/debootstrap/scripts/sid)
if ! debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" "${script[@]}" >"$WORK/debootstrap.log" 2>&1; then
  log "debootstrap failed; last lines of its log:"
  tail -n 30 "$WORK/debootstrap.log" >&2
  [[ -f $ROOT/debootstrap/debootstrap.log ]] && tail -n 30 "$ROOT/debootstrap/debootstrap.log" >&2
  exit 1
fi

# --- apt sources like the official image (deb822) ----------------------------------------------
rm -f "$ROOT/etc/apt/sources.list"
mkdir -p "$ROOT/etc/apt/sources.list.d"
cat >"$ROOT/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

# --- the official image's apt/dpkg snippets (debuerreotype "slimify" + docker-* apt configs) ---
cat >"$ROOT/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' >"$ROOT/etc/apt/apt.conf.d/docker-no-languages"
# not in the official image: the test machines' mirror is a frozen copy of Debian's, on which the Release
# files of suites that carry a Valid-Until date (testing, such as forky, and the security suites) expire
echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/hpc-slurm-k8s-frozen-mirror"
echo 'Acquire::GzipIndexes "true";' >"$ROOT/etc/apt/apt.conf.d/docker-gzip-indexes"
echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$ROOT/etc/apt/apt.conf.d/docker-autoremove-suggests"
mkdir -p "$ROOT/etc/dpkg/dpkg.cfg.d"
cat >"$ROOT/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# "slim" variant: files that are normally unneeded in containers are excluded
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
# apply the same exclusions to what debootstrap already installed
find "$ROOT/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$ROOT/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$ROOT"/usr/share/{groff,info,linda,locale,man}/* "$ROOT"/usr/share/lintian/overrides/* 2>/dev/null || true

# --- caches, lists, logs, machine identity ------------------------------------------------------
rm -rf "$ROOT"/var/cache/apt/* "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*.log \
       "$ROOT"/var/log/apt/* "$ROOT"/var/cache/debconf/*-old "$ROOT"/var/lib/dpkg/*-old \
       "$ROOT"/tmp/* "$ROOT"/debootstrap
mkdir -p "$ROOT/var/lib/apt/lists/partial" "$ROOT/var/cache/apt/archives/partial"
: >"$ROOT/etc/machine-id"
# containers get their hostname and resolv.conf from the engine
: >"$ROOT/etc/hostname"
rm -f "$ROOT/etc/resolv.conf"

log "importing as $BASE_IMAGE"
tar --numeric-owner --xattrs -C "$ROOT" -c . |
  "$DOCKER" import -c 'CMD ["bash"]' -m "debootstrap --variant=minbase $SUITE $MIRROR" - "$BASE_IMAGE" >/dev/null
log "done in $(( $(date +%s) - start )) s: $("$DOCKER" image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$BASE_IMAGE")"
