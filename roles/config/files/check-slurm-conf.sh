# Run in a short-lived container of a Slurm image (roles/config/tasks/check.yml): does this image's Slurm accept
# the candidate slurm.conf in $SLURM_CONF_CANDIDATE? Exit 0 if so; else 1, each reason on its own line.
# 1. Slurm's own parser, as every daemon and command reads the file: `scontrol show hostnames` reads and
#    validates every key and value (and the rules between keys that stop a daemon) without asking slurmctld.
# 2. The plugins the file names (*Type, *Types, *Plugin, *Plugins values prefix/name; MpiDefault), each a file
#    <PluginDir>/<prefix>_<name>.so of the image: a daemon that cannot load one stops. A `none` is no plugin.
set -u
dir=$(mktemp -d)
conf=$dir/slurm.conf
printf '%s\n' "$SLURM_CONF_CANDIDATE" > "$conf"
refused=0
if ! SLURM_CONF=$conf scontrol show hostnames localhost > /dev/null 2> "$dir/parser" || grep -q 'fatal' "$dir/parser"; then
  sed 's/^/slurm.conf: /' "$dir/parser"
  refused=1
fi
plugin_dir=$(sed -n 's/^[Pp][Ll][Uu][Gg][Ii][Nn][Dd][Ii][Rr]=//p' "$conf" | tail -n 1)
if [ -z "$plugin_dir" ]; then
  for candidate in /usr/lib/*/slurm-wlm /usr/lib/*/slurm /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm; do
    if [ -e "$candidate/auth_munge.so" ] || [ -e "$candidate/select_cons_tres.so" ]; then plugin_dir=$candidate; break; fi
  done
fi
if [ -z "$plugin_dir" ]; then
  echo "slurm.conf: no Slurm plugin directory found in this image (set PluginDir): the plugins were not checked"
  exit "$refused"
fi
plugins=$(grep -i -E '^[A-Za-z]*(Type|Types|Plugin|Plugins)=' "$conf" | cut -d= -f2- | tr ',' '\n' | grep '/' || true)
mpi=$(sed -n 's/^[Mm][Pp][Ii][Dd][Ee][Ff][Aa][Uu][Ll][Tt]=//p' "$conf" | tail -n 1)
[ -n "$mpi" ] && plugins="$plugins
mpi/$mpi"
for plugin in $plugins; do
  case "${plugin#*/}" in none) continue ;; esac
  if [ ! -e "$plugin_dir/${plugin%%/*}_${plugin#*/}.so" ]; then
    echo "slurm.conf: this image has no plugin $plugin ($plugin_dir/${plugin%%/*}_${plugin#*/}.so)"
    refused=1
  fi
done
exit "$refused"
