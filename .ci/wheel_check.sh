#!/usr/bin/env bash
# Build the wheel and import every module it ships in a clean venv with no extras.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
uv build --wheel --out-dir "$out/dist" >/dev/null
uv venv --quiet "$out/venv"
uv pip install --quiet --python "$out/venv/bin/python" "$out"/dist/*.whl
cd "$out" && "$out/venv/bin/python" -I "$OLDPWD/.ci/wheel_imports.py"
