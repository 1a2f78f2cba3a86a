#!/usr/bin/env bash
# hpc.slurm_k8s image entrypoint (installed as /usr/local/sbin/slurm-k8s-entrypoint, run under tini).
# Implements the image contract of docs/architecture.md:
#   slurm-k8s-entrypoint slurmctld|slurmdbd|slurmd|login|slurmrestd|portal [extra daemon args...]
#   slurm-k8s-entrypoint COMMAND [ARGS...]   (any other command, after the common set-up)
set -euo pipefail

PROG=slurm-k8s-entrypoint
log() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: ERROR: $*" >&2; exit 1; }
[[ ${SLURM_K8S_DEBUG:-false} == true ]] && set -x

# Mount points of the contract (overridable for tests only).
K8S_ROOT=${SLURM_K8S_ROOT:-/etc/slurm-k8s}
CONFIG_DIR=$K8S_ROOT/config
MUNGE_KEY_SRC=$K8S_ROOT/munge/munge.key
DBD_CONF_SRC=$K8S_ROOT/slurmdbd/slurmdbd.conf
DBD_PASS_SRC=$K8S_ROOT/storage/password
JWT_KEY_SRC=$K8S_ROOT/jwt/jwt_hs256.key
SSH_DIR=$K8S_ROOT/ssh
PORTAL_CONFIG=$K8S_ROOT/portal/jupyterhub_config.py
# the users ConfigMap (passwd, group, <name>.authorized_keys), read by libnss-extrausers at each lookup
USERS_PASSWD=/var/lib/extrausers/passwd
SLURM_ETC=/etc/slurm
# preloaded into slurmd where the container may not create namespaces (see the slurmd start below)
NS_FALLBACK=/usr/local/lib/hpc-slurm-k8s/libslurmd-ns-fallback.so
STATE_DIR=/var/spool/slurmctld

usage() {
  cat >&2 <<EOF
usage: $PROG slurmctld|slurmdbd|slurmd|login|slurmrestd|portal [ARGS...]
       $PROG COMMAND [ARGS...]      (runs COMMAND after the common set-up, e.g. bash)
EOF
}

[[ $# -ge 1 ]] || { usage; die "no role or command given"; }
ROLE=$1
shift

IS_ROOT=false
[[ $(id -u) -eq 0 ]] && IS_ROOT=true
case $ROLE in
  slurmctld|slurmdbd|slurmd|login|portal)
    # the daemons drop privileges themselves (SlurmUser, munge, sshd privilege separation; the portal's hub
    # submits each user's notebook job as that user)
    [[ $IS_ROOT == true ]] || die "role $ROLE must start as root (uid 0), not uid $(id -u): do not set runAsUser" ;;
  slurmrestd)
    # slurmrestd refuses root and SlurmUser itself; say so before it starts
    [[ $IS_ROOT == false && $(id -un 2>/dev/null) != slurm ]] ||
      die "role slurmrestd must run as an unprivileged user (the image's slurmrestd, uid 64032), not $(id -un 2>/dev/null || id -u)" ;;
esac

# --- configuration: symlink each ConfigMap file into /etc/slurm --------------------------------
link_config() {
  local required=$1 f name n=0
  if [[ ! -d $CONFIG_DIR ]]; then
    [[ $required == true ]] && die "missing mount $CONFIG_DIR/ (ConfigMap with slurm.conf) needed by role $ROLE"
    log "no $CONFIG_DIR/ mounted; using $SLURM_ETC as it is"
    return 0
  fi
  # drop links left by a previous run of this container to files that are gone from the ConfigMap
  for f in "$SLURM_ETC"/*; do
    if [[ -L $f && $(readlink "$f") == "$CONFIG_DIR"/* && ! -e $f ]]; then rm -f "$f"; fi
  done
  for f in "$CONFIG_DIR"/*; do
    [[ -e $f ]] || continue
    name=${f##*/}
    [[ -f $f ]] || continue   # kubelet's ..data and timestamp dirs start with a dot: not matched by *
    if [[ $name == slurmdbd.conf ]]; then
      log "ignoring $f: slurmdbd.conf comes from $DBD_CONF_SRC (a Secret)"; continue
    fi
    ln -sfn "$f" "$SLURM_ETC/$name"
    n=$((n + 1))
  done
  if [[ $required == true && ! -e $SLURM_ETC/slurm.conf ]]; then
    die "missing $CONFIG_DIR/slurm.conf (role $ROLE needs it)"
  fi
  log "linked $n file(s) from $CONFIG_DIR into $SLURM_ETC"
}

# --- homes of the site's users -------------------------------------------------------------------
# The users themselves need no set-up: every pod reads them from the mounted passwd and group files at
# each lookup (libnss-extrausers). Homes on the shared /home are made here for the users known at start
# (slurmd, login), and by pam_mkhomedir at the first login of a user added later; an existing home is
# never touched.
make_homes() {
  local name pw uid gid home rest made=0
  if [[ ! -f $USERS_PASSWD ]]; then
    log "no $USERS_PASSWD mounted: no site users"; return 0
  fi
  [[ -d /home && -w /home ]] || { log "/home is not writable: homes are not created"; return 0; }
  while IFS=: read -r name pw uid gid rest; do
    [[ $name =~ ^[a-z_][a-z0-9_-]{0,31}$ && $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ ]] || continue
    home=/home/$name
    [[ -e $home ]] && continue
    install -d -o "$uid" -g "$gid" -m 0700 "$home"
    cp -a /etc/skel/. "$home"/ 2>/dev/null || true
    chown -R "$uid:$gid" "$home"
    chmod 0700 "$home"   # (cp -a of skel's "." gave it skel's mode)
    made=$((made + 1))
  done <"$USERS_PASSWD"
  log "$(grep -c . "$USERS_PASSWD") site user(s); $made home(s) created"
}

# --- munge --------------------------------------------------------------------------------------
start_munge() {
  local required=$1
  if [[ ! -f $MUNGE_KEY_SRC ]]; then
    [[ $required == true ]] && die "missing munge key $MUNGE_KEY_SRC (mount the munge Secret at ${MUNGE_KEY_SRC%/*}/)"
    log "no munge key at $MUNGE_KEY_SRC: munged not started"; return 0
  fi
  local sock=/run/munge/munge.socket.2
  # (the daemon roles are root, checked at the start; only a plain command can get here as another user)
  if [[ $IS_ROOT != true ]]; then
    log "not root: munged not started (commands needing munge will fail)"; return 0
  fi
  install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
  install -d -o munge -g munge -m 0755 /run/munge
  install -o munge -g munge -m 0400 "$MUNGE_KEY_SRC" /etc/munge/munge.key
  # a restarted container keeps /run: remove the previous munged's socket, lock and pid files
  rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock /run/munge/munged.pid
  local -a cmd=(/usr/sbin/munged --num-threads="${SLURM_K8S_MUNGE_THREADS:-4}")
  setpriv --reuid=munge --regid=munge --init-groups "${cmd[@]}" ||
    { tail -n 20 /var/log/munge/munged.log >&2 2>/dev/null || true; die "munged failed to start"; }
  for _ in $(seq 1 100); do
    [[ -S $sock ]] && break
    sleep 0.1
  done
  [[ -S $sock ]] || { tail -n 20 /var/log/munge/munged.log >&2 2>/dev/null || true; die "munged socket $sock did not appear within 10 s"; }
  munge -n -t 10 | unmunge >/dev/null || die "munge self-test (munge -n | unmunge) failed"
  log "munged running"
}

# --- waiting for endpoints ----------------------------------------------------------------------
wait_for_endpoints() {
  local list=${SLURM_K8S_WAIT_FOR:-} timeout=${SLURM_K8S_WAIT_TIMEOUT:-300} ep host port start now last
  [[ -n $list ]] || return 0
  [[ $timeout =~ ^[0-9]+$ ]] || die "SLURM_K8S_WAIT_TIMEOUT must be a number of seconds, got '$timeout'"
  start=$(date +%s)
  IFS=, read -ra eps <<<"$list"
  for ep in "${eps[@]}"; do
    ep=${ep//[[:space:]]/}
    [[ -n $ep ]] || continue
    host=${ep%:*}; port=${ep##*:}
    [[ $host != "$ep" && $port =~ ^[0-9]+$ ]] || die "SLURM_K8S_WAIT_FOR: '$ep' is not host:port"
    host=${host#[}; host=${host%]}
    log "waiting for $ep (timeout ${timeout}s)"
    last=$start
    # shellcheck disable=SC2016  # $1/$2 are expanded by the inner bash, from its arguments
    until timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$host" "$port" 2>/dev/null; do
      now=$(date +%s)
      if (( now - start >= timeout )); then
        die "timed out after ${timeout}s waiting for $ep (SLURM_K8S_WAIT_FOR); is the service up and resolvable?"
      fi
      if (( now - last >= 15 )); then log "still waiting for $ep ($((now - start))s)"; last=$now; fi
      sleep 1
    done
    log "$ep is reachable"
  done
}

# --- role-specific set-up -----------------------------------------------------------------------
setup_slurmdbd() {
  [[ -f $DBD_CONF_SRC ]] || die "missing $DBD_CONF_SRC (mount the slurmdbd Secret at ${DBD_CONF_SRC%/*}/)"
  rm -f "$SLURM_ETC/slurmdbd.conf"
  install -o slurm -g slurm -m 0600 "$DBD_CONF_SRC" "$SLURM_ETC/slurmdbd.conf"
  # auth/slurm's SACK socket (slurmdbd runs as SlurmUser and cannot make it under /run itself)
  install -d -o slurm -g slurm -m 0755 /run/slurmdbd
  add_storage_pass
  install_jwt_key
}

# StoragePass from the mounted key of the database password Secret (the internal database's, the
# collection's for database_external_password, or the site's own): the rendered slurmdbd.conf holds no
# password, so a rotated password needs no change of it. Trailing line breaks are dropped; a value that
# slurmdbd.conf cannot hold is refused without being shown.
add_storage_pass() {
  [[ -f $DBD_PASS_SRC ]] || die "missing $DBD_PASS_SRC (mount the database password Secret's key as file ${DBD_PASS_SRC##*/} at ${DBD_PASS_SRC%/*}/)"
  local LC_ALL=C pass allowed='^[]!$-&(-[^-~]+$'  # printable ASCII but for " # ' and the backslash
  pass=$(<"$DBD_PASS_SRC")
  [[ $pass =~ $allowed ]] ||
    die "the database password in $DBD_PASS_SRC is empty or has a character slurmdbd.conf cannot hold (white space, #, a backslash, quotes, non-ASCII); the value is not shown"
  printf 'StoragePass=%s\n' "$pass" >>"$SLURM_ETC/slurmdbd.conf"
}

# the JWT key (a Secret, root-owned) where slurmctld and slurmdbd read it as SlurmUser; mounted only
# when slurmrestd is deployed (AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key)
install_jwt_key() {
  rm -f "$SLURM_ETC/jwt_hs256.key"
  [[ -f $JWT_KEY_SRC ]] || return 0
  install -o slurm -g slurm -m 0600 "$JWT_KEY_SRC" "$SLURM_ETC/jwt_hs256.key"
  log "installed the JWT key for auth/jwt"
}

setup_slurmctld() {
  install_jwt_key
  # auth/slurm's SACK socket (slurmctld runs as SlurmUser and cannot make it under /run itself)
  install -d -o slurm -g slurm -m 0755 /run/slurmctld
  mkdir -p "$STATE_DIR"
  # fix ownership of a fresh or foreign volume; leave an already-correct one alone (can be large)
  if [[ $(stat -c %U "$STATE_DIR") != slurm ]]; then
    chown -R slurm:slurm "$STATE_DIR"
  fi
  chmod 0750 "$STATE_DIR"
}

# auth/slurm's SACK socket of slurmd (/run/slurm/sack.socket, for the job steps on this node): slurmd runs
# as root, and 26.05's refuses to start when that directory exists and is owned by another user (24.11's did not)
# (the image makes it for sackd and the commands, owned by SlurmUser)
setup_slurmd() {
  install -d -o root -g root -m 0755 /run/slurm
}

setup_login() {
  local k n=0
  [[ -d $SSH_DIR ]] || die "missing mount $SSH_DIR/ (Secret with ssh_host_*_key) needed by role login"
  for k in "$SSH_DIR"/ssh_host_*_key; do
    [[ -f $k ]] || continue
    install -m 0600 "$k" "/etc/ssh/${k##*/}"
    [[ -f $k.pub ]] && install -m 0644 "$k.pub" "/etc/ssh/${k##*/}.pub"
    n=$((n + 1))
  done
  (( n > 0 )) || die "no ssh_host_*_key in $SSH_DIR/"
  install -d -m 0755 /run/sshd
  /usr/sbin/sshd -t || die "sshd configuration test failed"
  log "installed $n ssh host key(s)"
}

# --- sackd on login and the portal's hub ---------------------------------------------------------------
# sackd, Slurm's auth and cred kiosk, runs on login (and the portal's hub) when the nodes are configless (SLURM_CONF_SERVER): it
# fetches the configuration from slurmctld into /run/slurm/conf/, where the commands look for it when
# /etc/slurm/slurm.conf does not exist, and receives every reconfigure from slurmctld. With AuthType=auth/slurm,
# whose key set the site's commands on login cannot read, it also signs and checks their credentials through
# /run/slurm/sack.socket. (slurmd does both on the workers.) It runs as SlurmUser, to whom slurmctld addresses
# its pushes, and reads the key set from slurm-k8s-sackd-key's copy; it is started by its absolute path: on
# SIGHUP, which a key rotation sends, it re-executes itself from argv[0].
login_auth_slurm() {
  if [[ -n ${SLURM_CONF_SERVER:-} ]]; then
    [[ -e $CONFIG_DIR/slurm.jwks ]]   # configless: the key set is all that is mounted, and only with auth/slurm
  else
    grep -qiE '^[[:space:]]*AuthType[[:space:]]*=[[:space:]]*auth/slurm[[:space:]]*$' "$SLURM_ETC/slurm.conf"
  fi
}

start_sackd() {
  local args=(-D) i
  if login_auth_slurm; then
    [[ -r $CONFIG_DIR/slurm.jwks ]] || die "AuthType=auth/slurm but no key set at $CONFIG_DIR/slurm.jwks (the Secret slurm-auth-key is projected there)"
    SLURM_SACK_JWKS=$(/usr/local/sbin/slurm-k8s-sackd-key)
    export SLURM_SACK_JWKS
    # Slurm takes a key set in /etc/slurm before SLURM_SACK_JWKS, and SlurmUser cannot read that one; the
    # commands here authenticate through sackd's socket
    rm -f "$SLURM_ETC/slurm.jwks"
  elif [[ -z ${SLURM_CONF_SERVER:-} ]]; then
    return 0   # munge and a mounted slurm.conf: the commands need no sackd
  fi
  [[ -n ${SLURM_CONF_SERVER:-} ]] && args+=(--conf-server "$SLURM_CONF_SERVER")
  install -d -o slurm -g slurm -m 0755 /run/slurm
  rm -f /run/slurm/sack.socket
  # in the background (sshd or JupyterHub, which this shell becomes, is its parent), its log on the container's stderr
  setpriv --reuid slurm --regid slurm --init-groups /usr/sbin/sackd "${args[@]}" &
  if [[ -n ${SLURM_CONF_SERVER:-} ]]; then
    # sackd retries every 10 s while slurmctld does not answer; sshd starts anyway after a minute (the users'
    # homes are there; their Slurm commands work once sackd has the configuration)
    for i in $(seq 1 300); do [[ -S /run/slurm/sack.socket && -f /run/slurm/conf/slurm.conf ]] && break; sleep 0.2; done
    if [[ -f /run/slurm/conf/slurm.conf ]]; then
      log "sackd running, configuration from $SLURM_CONF_SERVER in /run/slurm/conf"
    else
      log "WARNING: sackd has no configuration from $SLURM_CONF_SERVER after 60 s; starting $ROLE anyway (Slurm commands fail until slurmctld answers)"
    fi
    return 0
  fi
  for i in $(seq 1 50); do [[ -S /run/slurm/sack.socket ]] && break; sleep 0.2; done
  [[ -S /run/slurm/sack.socket ]] || die "sackd did not open /run/slurm/sack.socket within 10 s"
  log "sackd running (auth/slurm)"
}

# slurmd started with --conf-server (configless) is told where auth/slurm's key set is mounted: its slurm.conf
# is then the cache in /run/slurm/conf/, where no key set is
configless_key_set() {
  if [[ -e $CONFIG_DIR/slurm.jwks ]]; then
    export SLURM_SACK_JWKS=$CONFIG_DIR/slurm.jwks
  fi
}

# --- main ---------------------------------------------------------------------------------------
case $ROLE in
  slurmctld) link_config true ;;
  slurmdbd)  link_config false ;;
  # configless (SLURM_CONF_SERVER): no slurm.conf mounted, at most auth/slurm's key set
  slurmd|login)
    if [[ -n ${SLURM_CONF_SERVER:-} ]]; then link_config false; else link_config true; fi
    make_homes ;;
  # the portal's hub: a client of Slurm as login is, without /home (the notebooks run on the slurmd pods)
  portal)
    if [[ -n ${SLURM_CONF_SERVER:-} ]]; then link_config false; else link_config true; fi ;;
  # unprivileged: reads the mounted slurm.conf in place
  slurmrestd) [[ -f $CONFIG_DIR/slurm.conf ]] || die "missing $CONFIG_DIR/slurm.conf (role slurmrestd needs it)"
              export SLURM_CONF=$CONFIG_DIR/slurm.conf ;;
  *)         link_config false ;;
esac

case $ROLE in
  slurmctld|slurmdbd|slurmd|login|portal) start_munge true ;;
  slurmrestd) ;;   # rest_auth/jwt: every request carries the user's token; no munge key here
  *) start_munge false ;;
esac

case $ROLE in
  slurmdbd)  setup_slurmdbd ;;
  slurmctld) setup_slurmctld ;;
  slurmd)    setup_slurmd ;;
  login)     setup_login ;;
esac

wait_for_endpoints
if [[ $ROLE == login || $ROLE == portal ]]; then start_sackd; fi

case $ROLE in
  slurmctld)
    # the daemon reads every file of the Slurm ConfigMap where it is mounted (Slurm takes cgroup.conf,
    # gres.conf, mpi.conf... from slurm.conf's directory): a file added later is read at the next
    # reconfigure, where the links in /etc/slurm (for commands run in the pod) exist only for the files
    # present at start
    export SLURM_CONF=$CONFIG_DIR/slurm.conf
    # a slurmctld killed (OOM, SIGKILL, node lost) can leave a state file missing, which 26.05 refuses to start
    # on, restart after restart: put back what slurmctld's own copies hold (slurmctld-state.sh says why and how)
    /usr/local/libexec/slurm-k8s-slurmctld-state "$STATE_DIR" "$SLURM_CONF"
    log "starting slurmctld"
    exec /usr/sbin/slurmctld -D "$@" ;;
  slurmdbd)
    log "starting slurmdbd"
    exec /usr/sbin/slurmdbd -D "$@" ;;
  slurmd)
    args=(-D -b)
    node=${SLURMD_NODENAME:-$(hostname -s)}
    case ${SLURMD_DYNAMIC:-true} in
      true)
        args+=(-Z -N "$node")
        [[ -n ${SLURMD_NODE_CONF:-} ]] && args+=(--conf "$SLURMD_NODE_CONF") ;;
      false)
        args+=(-N "$node")
        [[ -n ${SLURMD_NODE_CONF:-} ]] && log "SLURMD_NODE_CONF is ignored when SLURMD_DYNAMIC=false (node defined in slurm.conf)" ;;
      *) die "SLURMD_DYNAMIC must be true or false, got '${SLURMD_DYNAMIC}'" ;;
    esac
    if [[ -n ${SLURM_CONF_SERVER:-} ]]; then
      args+=(--conf-server "$SLURM_CONF_SERVER")
      configless_key_set
    else
      export SLURM_CONF=$CONFIG_DIR/slurm.conf   # as slurmctld: every file where it is mounted
    fi
    # a job that asks for the user's login environment (sbatch --export=NONE, --get-user-env...) makes slurmd
    # load it in a child in new PID and mount namespaces; where this container may not create them (a pod
    # without CAP_SYS_ADMIN), that clone fails and slurmd exits, ending every job here. The library makes
    # slurmd take Slurm's own fork path instead (images/slurm/slurmd-ns-fallback.c says how)
    if ! unshare --pid --mount --fork true 2>/dev/null; then
      export LD_PRELOAD=$NS_FALLBACK
      log "this container may not create PID and mount namespaces: slurmd loads users' login environments by fork ($NS_FALLBACK)"
    fi
    log "starting slurmd ${args[*]} $*"
    exec /usr/sbin/slurmd "${args[@]}" "$@" ;;
  login)
    log "starting sshd"
    exec /usr/sbin/sshd -D -e "$@" ;;
  portal)
    # JupyterHub (roles/portal/files/jupyterhub_config.py, mounted with its settings); its SQLite database and
    # the proxy's files in the working directory, the claim portal-data
    [[ -f $PORTAL_CONFIG ]] || die "missing $PORTAL_CONFIG (the ConfigMap portal) needed by role portal"
    cd /var/lib/jupyterhub
    log "starting jupyterhub -f $PORTAL_CONFIG $*"
    exec jupyterhub -f "$PORTAL_CONFIG" "$@" ;;
  slurmrestd)
    # slurmrestd unshares its file table and System V IPC namespace; the RuntimeDefault seccomp
    # profile refuses unshare(2) without CAP_SYS_ADMIN (which the pod never gets), and the container
    # has file and IPC namespaces of its own already
    export SLURMRESTD_SECURITY=${SLURMRESTD_SECURITY:-disable_unshare_files,disable_unshare_sysv}
    # SLURM_JWT=daemon: slurmrestd loads auth/jwt in place of AuthType (auth/munge would need munged
    # and the munge key, with which a compromised slurmrestd could speak as any user)
    export SLURM_JWT=daemon
    # two malloc arenas: with one per thread (glibc's default, 20 threads) the memory of each large
    # reply stays with its thread; measured with 1,000 jobs, GET /jobs grew past 1 GiB in 15 calls
    # (OOM-killed) and stays at ~310 MB with 2
    export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
    # the /slurmdb/ endpoints need slurmdbd accounting: without it, slurmrestd fails to start when it
    # loads them, so then only the /slurm/ ones
    plugins=()
    if ! grep -qiE '^[[:space:]]*AccountingStorageType[[:space:]]*=[[:space:]]*accounting_storage/slurmdbd' "$SLURM_CONF"; then
      plugins=(-s openapi/slurmctld)
      log "no slurmdbd accounting in slurm.conf: serving the /slurm/ endpoints only"
    fi
    log "starting slurmrestd -a rest_auth/jwt ${plugins[*]} $*"
    exec /usr/sbin/slurmrestd -a rest_auth/jwt "${plugins[@]}" "$@" ;;
  *)
    log "running $ROLE $*"
    exec "$ROLE" "$@" ;;
esac
