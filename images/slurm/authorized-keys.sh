#!/bin/sh
# sshd AuthorizedKeysCommand (run as nobody): the keys of one user from the users ConfigMap, mounted at
# /var/lib/extrausers and read at each login, so that a changed or removed key counts at once (after the
# kubelet's refresh of the mount) and no pod restarts. A user without keys gets none.
set -eu
user=${1:-}
case $user in
  ''|*[!a-z0-9_-]*|[!a-z_]*) echo "slurm-k8s-authorized-keys: invalid user name" >&2; exit 1 ;;
esac
keys=/var/lib/extrausers/$user.authorized_keys
[ -f "$keys" ] || exit 0
exec cat -- "$keys"
