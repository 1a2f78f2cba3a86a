# Run in a short-lived container of a Slurm image (roles/config/tasks/check.yml): does this image's Slurm accept
# the candidate slurm.conf in $SLURM_CONF_CANDIDATE? Exit 0 if so; else 1, each reason on its own line.
# 1. Slurm's own parser, as every daemon and command reads the file: `scontrol show hostnames` reads and
#    validates every key and value (and the rules between keys that stop a daemon) without asking slurmctld.
# 2. The plugins the file names (*Type, *Types, *Plugin, *Plugins values prefix/name; MpiDefault): a daemon that
#    cannot load one stops. Slurm loads prefix/name from <dir>/prefix_name.so of any PluginDir entry
#    (common/plugin.c plugin_load_and_link). Names are taken as Slurm's interfaces take them: AuthType and
#    AuthAltTypes with or without auth/ (interfaces/auth.c; AuthAltTypes only where $SLURM_CONF_CHECK_AUTH_ALT_TYPES
#    is yes: slurmctld and slurmdbd alone load them); CredType with or without auth/ or cred/, where `slurm` is
#    auth/slurm's own credential, inside auth_slurm.so (interfaces/cred.c). A `none` is no plugin, and a name
#    without a prefix elsewhere is left to the daemon (some interfaces add their prefix).
set -u
dir=$(mktemp -d)
conf=$dir/slurm.conf
printf '%s\n' "$SLURM_CONF_CANDIDATE" > "$conf"
refused=0
if ! SLURM_CONF=$conf scontrol show hostnames localhost > /dev/null 2> "$dir/parser" || grep -q 'fatal' "$dir/parser"; then
  sed 's/^/slurm.conf: /' "$dir/parser"
  refused=1
fi
plugin_dirs=$(sed -n 's/^[Pp][Ll][Uu][Gg][Ii][Nn][Dd][Ii][Rr]=//p' "$conf" | tail -n 1 | tr ':' ' ')
if [ -z "$plugin_dirs" ]; then
  for candidate in /usr/lib/*/slurm-wlm /usr/lib/*/slurm /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm; do
    if [ -e "$candidate/auth_munge.so" ] || [ -e "$candidate/select_cons_tres.so" ]; then plugin_dirs=$candidate; break; fi
  done
fi
if [ -z "$plugin_dirs" ]; then
  echo "slurm.conf: no Slurm plugin directory found in this image (set PluginDir): the plugins were not checked"
  exit "$refused"
fi
# one prefix/name per line, as Slurm loads it
plugins=$(grep -i -E '^[A-Za-z]*(Type|Types|Plugin|Plugins)=|^MpiDefault=' "$conf" | while IFS='=' read -r key value; do
  for plugin in $(printf '%s' "$value" | tr ',' ' '); do
    case $(printf '%s' "$key" | tr '[:upper:]' '[:lower:]') in
      mpidefault) plugin=mpi/$plugin ;;
      authtype) plugin=auth/${plugin#auth/} ;;
      authalttypes)
        if [ "${SLURM_CONF_CHECK_AUTH_ALT_TYPES:-no}" != yes ]; then continue; fi
        plugin=auth/${plugin#auth/} ;;
      credtype)
        plugin=${plugin#auth/}
        plugin=${plugin#cred/}
        if [ "$plugin" = slurm ]; then plugin=auth/slurm; else plugin=cred/$plugin; fi ;;
    esac
    case $plugin in */*) printf '%s\n' "$plugin" ;; esac
  done
done)
for plugin in $plugins; do
  case "${plugin#*/}" in none) continue ;; esac
  file=$(printf '%s' "$plugin" | tr '/' '_').so
  found=no
  for plugin_dir in $plugin_dirs; do
    if [ -e "$plugin_dir/$file" ]; then found=yes; break; fi
  done
  if [ "$found" = no ]; then
    echo "slurm.conf: this image has no plugin $plugin ($file in $(printf '%s' "$plugin_dirs" | tr ' ' ':'))"
    refused=1
  fi
done
exit "$refused"
