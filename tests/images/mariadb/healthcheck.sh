#!/usr/bin/env bash
# Subset of the official MariaDB image's healthcheck.sh:
#   healthcheck.sh [--su-mysql] [--defaults-file=F] --connect --innodb_initialized ...
# --connect              a TCP connection to the server works (authentication errors still count)
# --innodb_initialized   InnoDB is available (needs the healthcheck user made at initialisation)
# Exits 0 only when every requested test passes.
set -uo pipefail
DATADIR=/var/lib/mysql
defaults=$DATADIR/.my-healthcheck.cnf
tests=()
for a in "$@"; do
  case $a in
    --connect|--innodb_initialized|--innodb_buffer_pool_loaded|--mariadbupgrade) tests+=("${a#--}") ;;
    --defaults-file=*|--defaults-extra-file=*) defaults=${a#*=} ;;
    --su-mysql|--su=*|--datadir=*|--no-defaults|--verbose) ;;
    *) echo "healthcheck.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
(( ${#tests[@]} )) || tests=(connect)
client() {
  if [[ -r $defaults ]]; then mariadb --defaults-extra-file="$defaults" "$@"; else mariadb --no-defaults "$@"; fi
}
for t in "${tests[@]}"; do
  case $t in
    connect)
      out=$(client -h 127.0.0.1 --protocol=tcp --connect-timeout=2 -e 'SELECT 1' 2>&1)
      if grep -qF "Can't connect" <<<"$out"; then echo "healthcheck.sh: connect failed: $out" >&2; exit 1; fi ;;
    innodb_initialized)
      out=$(client --connect-timeout=2 -s -N -e "SELECT 1 FROM information_schema.ENGINES WHERE engine='innodb' AND support IN ('YES','DEFAULT','ENABLED')" 2>&1)
      [[ $out == 1 ]] || { echo "healthcheck.sh: innodb not initialized: $out" >&2; exit 1; } ;;
    innodb_buffer_pool_loaded)
      out=$(client --connect-timeout=2 -s -N -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='Innodb_buffer_pool_load_status'" 2>&1)
      [[ $out == *"completed"* || $out == *"not started"* ]] || { echo "healthcheck.sh: buffer pool not loaded: $out" >&2; exit 1; } ;;
    mariadbupgrade) ;;
  esac
done
exit 0
