#!/usr/bin/env bash
# Builds (once) the Debian sid roots of the integration tests' newer servers: MySQL 9.x and
# MariaDB 11.8. Neither runs on bookworm's C library, and sid's mysql-server-core and
# mariadb-server-core conflict, so each gets a root of its own; the tests run a server from
# its root through the root's own dynamic loader. The roots are cached: rerunning is a
# no-op once they are complete; a complete root that lacks a program the tests now need
# gets its packages installed in place; only an incomplete one is built again.
set -euo pipefail
CACHE="$HOME/.cache/changestream"
MYSQL_ROOT="${CHANGESTREAM_MYSQL_ROOT:-$CACHE/mysql-sid-root}"
MARIADB_ROOT="${CHANGESTREAM_MARIADB_ROOT:-$CACHE/mariadb-sid-root}"
MIRROR="${CHANGESTREAM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
MARKER=.changestream-complete
APT=(apt-get -o Acquire::Check-Valid-Until=false)

fail() { tail -20 "$1" >&2; exit 1; }

# has_programs ROOT PROGRAM...: every PROGRAM (relative to ROOT) is there.
has_programs() {
  local root=$1 program
  shift
  for program in "$@"; do [ -x "$root/$program" ] || return 1; done
}

# install_packages ROOT LOG PACKAGE...: apt-get install inside ROOT.
install_packages() {
  local root=$1 log=$2
  shift 2
  chroot "$root" "${APT[@]}" update -qq >>"$log" 2>&1 || fail "$log"
  DEBIAN_FRONTEND=noninteractive chroot "$root" "${APT[@]}" install -y -qq \
    --no-install-recommends "$@" >>"$log" 2>&1 || fail "$log"
  chroot "$root" apt-get clean
}

# sid_root NAME ROOT "PROGRAM..." PACKAGE...: a complete sid root at ROOT holding the
# PROGRAMs (the first is the server), which the PACKAGEs install.
sid_root() {
  local name=$1 root=$2 programs
  read -ra programs <<<"$3"
  shift 3
  local log=/tmp/changestream-$name-root.log
  if [ -f "$root/$MARKER" ] && has_programs "$root" "${programs[@]}"; then
    echo "$name root ready: $root"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then echo "setup-mysql-root: needs root (debootstrap, chroot)" >&2; exit 1; fi
  if [ -f "$root/$MARKER" ]; then
    echo "adding $* to the $name sid root in $root"
    : >"$log"
    install_packages "$root" "$log" "$@"
  else
    command -v debootstrap >/dev/null \
      || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    rm -rf "$root"
    mkdir -p "$(dirname "$root")"
    echo "building the $name sid root in $root (about a minute, once)"
    debootstrap --variant=minbase sid "$root" "$MIRROR" >"$log" 2>&1 || fail "$log"
    install_packages "$root" "$log" "$@"
    touch "$root/$MARKER"
  fi
  has_programs "$root" "${programs[@]}" \
    || { echo "setup-mysql-root: $root lacks one of: ${programs[*]}" >&2; exit 1; }
  "$root/lib64/ld-linux-x86-64.so.2" \
    --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" \
    "$root/${programs[0]}" --version
}

sid_root mysql "$MYSQL_ROOT" "usr/sbin/mysqld usr/bin/mysqlbinlog" \
  mysql-server-core mysql-client
sid_root mariadb "$MARIADB_ROOT" "usr/sbin/mariadbd usr/bin/mariadb-install-db usr/bin/mariadb-binlog" \
  mariadb-server-core mariadb-client
