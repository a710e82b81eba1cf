#!/usr/bin/env bash
# Builds the binlog corpus the corpus tests read: scripts/corpus.sh [DEST] [--from DIR]
# (default DEST ~/.cache/changestream/corpus; CHANGESTREAM_CORPUS_FROM=DIR takes the files
# from a local folder laid out as the corpus instead of downloading them). See
# scripts/corpus.py and docs/testing.md#the-binlog-corpus.
set -euo pipefail
exec python3 "$(dirname "$0")/corpus.py" "$@"
