#!/usr/bin/env bash
# The README's test command: installs everything the tests need on a fresh Debian (bookworm)
# machine with Python 3.11, then runs ruff, mypy and the whole test suite. Needs root for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
.venv/bin/ruff check .
bash scripts/typecheck.sh
# The binlog corpus: ../shared/corpus or CHANGESTREAM_CORPUS when there, else the one
# scripts/corpus.sh builds (once) in ~/.cache/changestream/corpus.
if [ -z "${CHANGESTREAM_CORPUS:-}" ] && [ ! -d ../shared/corpus ]; then
  export CHANGESTREAM_CORPUS="$HOME/.cache/changestream/corpus"
  bash scripts/corpus.sh "$CHANGESTREAM_CORPUS" \
    || echo "scripts/test.sh: the corpus lacks the files named above: the tests that read them fail" >&2
fi
export CHANGESTREAM_REQUIRE_SERVERS=1
set +e
.venv/bin/python -m pytest -q --durations=30 "$@"
rc=$?
set -e
# pytest exits 5 when it collected no tests (e.g. a filter matched nothing): not a failure.
if [ "$rc" = 5 ]; then rc=0; fi
exit "$rc"
