#!/usr/bin/env bash
# Installs what changestream needs on a fresh Debian (bookworm) machine with Python 3.11:
# MariaDB (the embedded default server), Java 17 (Spark), and the Python packages in .venv
# (with PySpark built once into a wheel cache). With --test also what the tests need: the
# MySQL 9 root (debootstrap) and the test tools. Needs root for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
test_deps=false
[ "${1:-}" = "--test" ] && test_deps=true
need=()
command -v mariadbd >/dev/null || need+=(mariadb-server mariadb-client)
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
# The compiled parts: a C compiler and Python's headers, and libzstd's header (MySQL's
# compressed transactions unpacked without letting the interpreter lock go).
command -v gcc >/dev/null || need+=(build-essential)
[ -f /usr/include/python3.11/Python.h ] || need+=(python3-dev)
[ -f /usr/include/zstd.h ] || need+=(libzstd-dev)
# JDBC drivers for Iceberg catalogs kept in PostgreSQL or SQLite (sink option catalog.uri).
[ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
[ -f /usr/share/java/sqlite-jdbc.jar ] || need+=(libxerial-sqlite-jdbc-java)
$test_deps && { command -v debootstrap >/dev/null || need+=(debootstrap); }
# PostgreSQL: the tests start one privately to hold a JDBC catalog.
$test_deps && { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql); }
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
$test_deps && bash scripts/setup-mysql-root.sh
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
extras=spark
$test_deps && extras=test,spark
.venv/bin/pip install -q --find-links "$wheels" -e ".[$extras]"
# An editable install writes no bytecode, and where PYTHONDONTWRITEBYTECODE is set nothing
# ever does: every start (and every decode worker) would compile each module again.
.venv/bin/python -m compileall -q changestream actors sinks >/dev/null
# The driver JVM's class-data archive (docs/sinks.md), written now rather than by the first
# Spark run, whose JVM would start without one and write it as it exits (about 12 s, once).
# Its output is read to the end: that waits for the JVM writing it.
prepared=$(.venv/bin/python -m changestream.sinks.spark.jvm.prepare 2>&1 \
  | grep '^changestream:') || true
echo "$prepared"
