#!/usr/bin/env bash
# The README's first command: installs what changestream needs (see scripts/install.sh),
# then runs the quick start: a private MariaDB with binlogs on, a sample workload, the router
# landing it into local Spark (Iceberg) tables, and the result shown.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/changestream quickstart "$@"
