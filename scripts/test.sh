#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian (bookworm) machine with Python 3.11,
# then runs ruff and the whole test suite. Needs root for apt and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
need=()
command -v mariadbd >/dev/null || need+=(mariadb-server mariadb-client)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/setup-mysql-root.sh
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[test]'
.venv/bin/ruff check .
export CHANGESTREAM_REQUIRE_SERVERS=1
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
# pytest exits 5 when it collected no tests (e.g. a filter matched nothing): not a failure.
if [ "$rc" = 5 ]; then rc=0; fi
exit "$rc"
