#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian (bookworm) machine with Python 3.11,
# then runs ruff and the whole test suite. Needs root for apt and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
need=()
command -v mariadbd >/dev/null || need+=(mariadb-server mariadb-client)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v java >/dev/null || need+=(openjdk-17-jre-headless)  # Spark sink tests
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/setup-mysql-root.sh
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
# PyPI has only an sdist of pyspark 3.5 (456 MB, built on install): build its wheel once and
# keep it (and the Iceberg runtime jar package) in a wheel cache, so later runs install fast.
wheels="${XDG_CACHE_HOME:-$HOME/.cache}/changestream/wheels"
mkdir -p "$wheels"
ls "$wheels"/pyspark-3.5.*.whl >/dev/null 2>&1 \
  || .venv/bin/pip wheel -q --no-deps -w "$wheels" 'pyspark>=3.5,<3.6'
ls "$wheels"/snowpark_connect_deps_iceberg-*.whl >/dev/null 2>&1 \
  || .venv/bin/pip wheel -q --no-deps -w "$wheels" 'snowpark-connect-deps-iceberg>=1.0.3,<2'
.venv/bin/pip install -q --find-links "$wheels" -e '.[test,spark]'
.venv/bin/ruff check .
export CHANGESTREAM_REQUIRE_SERVERS=1
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
# pytest exits 5 when it collected no tests (e.g. a filter matched nothing): not a failure.
if [ "$rc" = 5 ]; then rc=0; fi
exit "$rc"
