#!/usr/bin/env bash
# Entrypoint of the MariaDB test image: the official image's environment interface, in brief.
set -euo pipefail
log() { echo "mariadb-entrypoint: $*" >&2; }
die() { echo "mariadb-entrypoint: ERROR: $*" >&2; exit 1; }

DATADIR=/var/lib/mysql
SOCKET=/run/mysqld/mysqld.sock

# "docker run image --some-option" -> mariadbd --some-option
if [[ ${1:-} == -* ]]; then set -- mariadbd "$@"; fi
case ${1:-} in mariadbd|mysqld) ;; *) exec "$@" ;; esac
shift
set -- mariadbd "$@"

# as root: fix ownership, then run as mysql
if [[ $(id -u) -eq 0 ]]; then
  install -d -o mysql -g mysql -m 0755 /run/mysqld
  install -d -o mysql -g mysql "$DATADIR"
  [[ $(stat -c %u "$DATADIR") == "$(id -u mysql)" ]] || chown -R mysql:mysql "$DATADIR"
  exec setpriv --reuid=mysql --regid=mysql --init-groups "$0" "$@"
fi

# VAR from VAR, VAR_FILE, MYSQL_VAR or MYSQL_VAR_FILE
file_env() {
  local name=$1 alias=MYSQL_${1#MARIADB_} def=${2:-} v=
  for n in "$name" "$alias"; do
    local f=${n}_FILE
    if [[ -n ${!n:-} && -n ${!f:-} ]]; then die "both $n and $f are set"; fi
    if [[ -n ${!n:-} ]]; then v=${!n}; break; fi
    if [[ -n ${!f:-} ]]; then v=$(<"${!f}"); break; fi
  done
  printf -v "$name" '%s' "${v:-$def}"
  export "${name?}"
}
sql_str() { local s=${1//\\/\\\\}; s=${s//\'/\\\'}; printf "'%s'" "$s"; }
# shellcheck disable=SC2016  # the backticks are SQL identifier quotes, not command substitution
sql_id() { local s=${1//\`/\`\`}; printf '`%s`' "$s"; }

init_db() {
  file_env MARIADB_ROOT_PASSWORD
  file_env MARIADB_ROOT_HOST %
  file_env MARIADB_DATABASE
  file_env MARIADB_USER
  file_env MARIADB_PASSWORD
  file_env MARIADB_RANDOM_ROOT_PASSWORD
  file_env MARIADB_ALLOW_EMPTY_ROOT_PASSWORD
  if [[ -z $MARIADB_ROOT_PASSWORD && -z $MARIADB_RANDOM_ROOT_PASSWORD && -z $MARIADB_ALLOW_EMPTY_ROOT_PASSWORD ]]; then
    die "database is uninitialized and no root password option is given: set one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD"
  fi
  if [[ -n $MARIADB_USER && $MARIADB_USER == root ]]; then die "MARIADB_USER=root: use MARIADB_ROOT_PASSWORD"; fi
  if [[ -n $MARIADB_USER && -z $MARIADB_PASSWORD ]]; then die "MARIADB_USER is set but MARIADB_PASSWORD is not"; fi
  if [[ -n $MARIADB_RANDOM_ROOT_PASSWORD ]]; then
    MARIADB_ROOT_PASSWORD=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
    log "GENERATED ROOT PASSWORD: $MARIADB_ROOT_PASSWORD"
  fi

  local hc_pw sql
  hc_pw=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
  sql="SET @@SESSION.SQL_LOG_BIN=0;
DROP USER IF EXISTS root@'127.0.0.1', root@'::1';
EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname, '\'');
DELETE FROM mysql.global_priv WHERE user='';
SET PASSWORD FOR 'root'@'localhost'=PASSWORD($(sql_str "$MARIADB_ROOT_PASSWORD"));
CREATE USER 'healthcheck'@'127.0.0.1' IDENTIFIED BY $(sql_str "$hc_pw");
CREATE USER 'healthcheck'@'::1' IDENTIFIED BY $(sql_str "$hc_pw");
CREATE USER 'healthcheck'@'localhost' IDENTIFIED BY $(sql_str "$hc_pw");
GRANT USAGE ON *.* TO 'healthcheck'@'127.0.0.1', 'healthcheck'@'::1', 'healthcheck'@'localhost';"
  if [[ -n $MARIADB_ROOT_HOST && $MARIADB_ROOT_HOST != localhost ]]; then
    sql+="
CREATE USER 'root'@$(sql_str "$MARIADB_ROOT_HOST") IDENTIFIED BY $(sql_str "$MARIADB_ROOT_PASSWORD");
GRANT ALL ON *.* TO 'root'@$(sql_str "$MARIADB_ROOT_HOST") WITH GRANT OPTION;
GRANT PROXY ON ''@'%' TO 'root'@$(sql_str "$MARIADB_ROOT_HOST") WITH GRANT OPTION;"
  fi
  if [[ -n $MARIADB_DATABASE ]]; then
    sql+="
CREATE DATABASE IF NOT EXISTS $(sql_id "$MARIADB_DATABASE");"
  fi
  if [[ -n $MARIADB_USER ]]; then
    sql+="
CREATE USER $(sql_str "$MARIADB_USER")@'%' IDENTIFIED BY $(sql_str "$MARIADB_PASSWORD");"
    [[ -n $MARIADB_DATABASE ]] && sql+="
GRANT ALL ON $(sql_id "${MARIADB_DATABASE//_/\\_}").* TO $(sql_str "$MARIADB_USER")@'%';"
  fi
  sql+="
FLUSH PRIVILEGES;"

  log "initialising database in $DATADIR"
  mariadb-install-db --datadir="$DATADIR" --skip-test-db --auth-root-authentication-method=normal \
    --default-time-zone=SYSTEM --enforce-storage-engine= --skip-log-bin --expire-logs-days=0 \
    --loose-innodb_buffer_pool_load_at_startup=0 --loose-innodb_buffer_pool_dump_at_shutdown=0 \
    >/tmp/install-db.log 2>&1 ||
    { cat /tmp/install-db.log >&2; rm -rf "${DATADIR:?}"/*; die "mariadb-install-db failed"; }

  # a temporary server without networking for the set-up SQL and the init scripts
  # (mariadb-install-db --extra-file runs with --skip-grant-tables: no CREATE USER there)
  local f pid
  mariadbd --skip-networking --socket="$SOCKET" --skip-log-bin --wsrep-on=OFF \
    --loose-innodb_buffer_pool_load_at_startup=0 --loose-innodb_buffer_pool_dump_at_shutdown=0 &
  pid=$!
  for _ in $(seq 1 120); do
    mariadb --protocol=socket -uroot -e 'SELECT 1' >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || die "temporary server died during initialisation"
    sleep 0.25
  done
  mariadb --protocol=socket -uroot --binary-mode <<<"$sql" ||
    { kill "$pid"; wait "$pid" || true; rm -rf "${DATADIR:?}"/*; die "initial SQL failed"; }
  umask 077
  printf '[mariadb-client]\nport=3306\nsocket=%s\nuser=healthcheck\npassword=%s\n' "$SOCKET" "$hc_pw" \
    >"$DATADIR/.my-healthcheck.cnf"
  umask 022

  for f in /docker-entrypoint-initdb.d/*; do
    case $f in
      *.sh)     log "running $f"
                # shellcheck disable=SC1090
                . "$f" ;;
      *.sql)    log "running $f"; mariadb --protocol=socket -uroot -p"$MARIADB_ROOT_PASSWORD" ${MARIADB_DATABASE:+"$MARIADB_DATABASE"} <"$f" ;;
      *.sql.gz) log "running $f"; gunzip -c "$f" | mariadb --protocol=socket -uroot -p"$MARIADB_ROOT_PASSWORD" ${MARIADB_DATABASE:+"$MARIADB_DATABASE"} ;;
      *) if [[ -e $f ]]; then log "ignoring $f"; fi ;;
    esac
  done

  kill "$pid"; wait "$pid" || true
  log "initialisation done"
}

if [[ ! -d $DATADIR/mysql ]]; then
  init_db
else
  log "existing database in $DATADIR: skipping initialisation"
fi
exec "$@"
