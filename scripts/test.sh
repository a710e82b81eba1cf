#!/usr/bin/env bash
# The README's test command: installs everything the tests need on a fresh Debian (bookworm)
# machine with Python 3.11, then runs ruff, mypy and the whole test suite. Needs root for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
.venv/bin/ruff check .
bash scripts/typecheck.sh
export CHANGESTREAM_REQUIRE_SERVERS=1
set +e
.venv/bin/python -m pytest -q --durations=30 "$@"
rc=$?
set -e
# pytest exits 5 when it collected no tests (e.g. a filter matched nothing): not a failure.
if [ "$rc" = 5 ]; then rc=0; fi
exit "$rc"
