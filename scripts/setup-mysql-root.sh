#!/usr/bin/env bash
# Builds (once) the Debian sid roots of the integration tests' newer servers: MySQL 9.x and
# MariaDB 11.8. Neither runs on bookworm's C library and sid's mysql-server-core and
# mariadb-server-core conflict, so each gets a root of its own; the tests run the server
# from there through the root's own dynamic loader. The roots are cached: a complete one is
# left as it is, so rerunning is a no-op, and a machine with only the MySQL root gets just
# the MariaDB root added.
set -euo pipefail
CACHE="$HOME/.cache/changestream"
MYSQL_ROOT="${CHANGESTREAM_MYSQL_ROOT:-$CACHE/mysql-sid-root}"
MARIADB_ROOT="${CHANGESTREAM_MARIADB_ROOT:-$CACHE/mariadb-sid-root}"
MIRROR="${CHANGESTREAM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
MARKER=.changestream-complete

# ready ROOT SERVER: the root is complete and holds the server program.
ready() { [ -x "$1/$2" ] && [ -f "$1/$MARKER" ]; }

# build_root NAME ROOT SERVER PACKAGE...: debootstrap sid into ROOT and install PACKAGEs.
build_root() {
  local name=$1 root=$2 server=$3
  shift 3
  if ready "$root" "$server"; then
    echo "$name root ready: $root"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then echo "setup-mysql-root: needs root (debootstrap)" >&2; exit 1; fi
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  rm -rf "$root"
  mkdir -p "$(dirname "$root")"
  echo "building $name sid root in $root (about 2 minutes, once)"
  local log=/tmp/changestream-$name-root.log
  debootstrap --variant=minbase sid "$root" "$MIRROR" >"$log" 2>&1 \
    || { tail -20 "$log" >&2; exit 1; }
  chroot "$root" apt-get -o Acquire::Check-Valid-Until=false update -qq >>"$log" 2>&1 \
    || { tail -20 "$log" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -o Acquire::Check-Valid-Until=false \
    install -y -qq --no-install-recommends "$@" >>"$log" 2>&1 \
    || { tail -20 "$log" >&2; exit 1; }
  chroot "$root" apt-get clean
  touch "$root/$MARKER"
  "$root/lib64/ld-linux-x86-64.so.2" \
    --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" \
    "$root/$server" --version
}

build_root mysql "$MYSQL_ROOT" usr/sbin/mysqld mysql-server-core mysql-client
build_root mariadb "$MARIADB_ROOT" usr/sbin/mariadbd mariadb-server-core
