#!/usr/bin/env bash
# mypy on the package as it installs: actors/ and sinks/ are changestream.actors and
# changestream.sinks (a package-dir mapping mypy cannot follow), so the sources are staged
# in a temporary tree of that shape first; errors name the files in this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -r changestream "$stage/changestream"
cp -r actors "$stage/changestream/actors"
cp -r sinks "$stage/changestream/sinks"
cp -r examples "$stage/examples"
find "$stage" -name "*.so" -delete
python=$(pwd)/.venv/bin/python
set +e
(cd "$stage" && "$python" -m mypy changestream examples --python-executable "$python" --config-file "$OLDPWD/pyproject.toml") \
  | sed -e 's#^changestream/actors/#actors/#' -e 's#^changestream/sinks/#sinks/#'
rc=${PIPESTATUS[0]}
exit "$rc"
