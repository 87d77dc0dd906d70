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

# The installed command runs: --version, and doctor on a fresh home (exit 0 or 1 with
# its checks printed, never a traceback), with no extras installed.
"$out/venv/bin/vikingbot" --version
set +e
VIKINGBOT_HOME="$out/home" "$out/venv/bin/vikingbot" doctor >"$out/doctor.out" 2>&1
code=$?
set -e
if [ "$code" -gt 1 ] || grep -q "Traceback" "$out/doctor.out"; then
  echo "vikingbot doctor from the wheel failed (exit $code):" >&2
  cat "$out/doctor.out" >&2
  exit 1
fi
# A channel configured without its extra names the extra to install.
VIKINGBOT_HOME="$out/home" VIKINGBOT_BOT__CHANNELS__SLACK__ENABLED=true \
  "$out/venv/bin/vikingbot" channels status >"$out/channels.out" 2>&1 || true
if ! grep -q "pip install 'vikingbot\[slack\]'" "$out/channels.out"; then
  echo "a slack channel without the slack extra does not name the extra:" >&2
  cat "$out/channels.out" >&2
  exit 1
fi
# `uv tool install .` from the checkout puts a working `vikingbot` on the PATH.
cd "$OLDPWD"
UV_TOOL_DIR="$out/tools" UV_TOOL_BIN_DIR="$out/bin" uv tool install --quiet . >/dev/null
"$out/bin/vikingbot" --version
echo "wheel: every module imports; vikingbot --version and doctor run; uv tool install works"
