#!/usr/bin/env bash
# Builds (once) a Debian sid root holding MySQL server 9.x, for the integration tests.
# MySQL is not packaged for bookworm and sid's build needs glibc >= 2.38, so it runs
# from this root. The root is cached; rerunning is a no-op once it is complete.
set -euo pipefail
ROOT="${CHANGESTREAM_MYSQL_ROOT:-$HOME/.cache/changestream/mysql-sid-root}"
MIRROR="${CHANGESTREAM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if [ -x "$ROOT/usr/sbin/mysqld" ] && [ -f "$ROOT/.changestream-complete" ]; then
  echo "mysql root ready: $ROOT"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "setup-mysql-root: needs root (debootstrap)" >&2; exit 1; fi
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
rm -rf "$ROOT"
mkdir -p "$(dirname "$ROOT")"
echo "building MySQL sid root in $ROOT (about 2 minutes, once)"
debootstrap --variant=minbase sid "$ROOT" "$MIRROR" >/tmp/changestream-debootstrap.log 2>&1 \
  || { tail -20 /tmp/changestream-debootstrap.log >&2; exit 1; }
chroot "$ROOT" apt-get -o Acquire::Check-Valid-Until=false update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive chroot "$ROOT" apt-get -o Acquire::Check-Valid-Until=false \
  install -y -qq --no-install-recommends mysql-server-core mysql-client >/tmp/changestream-mysql-apt.log 2>&1 \
  || { tail -20 /tmp/changestream-mysql-apt.log >&2; exit 1; }
touch "$ROOT/.changestream-complete"
"$ROOT/lib64/ld-linux-x86-64.so.2" --library-path "$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu" "$ROOT/usr/sbin/mysqld" --version
