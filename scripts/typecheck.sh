#!/usr/bin/env bash
# mypy on the package and the examples (actors/ and sinks/ at the top are links into
# changestream/: checked there, once).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m mypy changestream examples
