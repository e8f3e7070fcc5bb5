#!/usr/bin/env bash
# The test suite on a real multi-executor local Spark cluster. Extra arguments go to pytest
# (e.g. scripts/test.sh -k mwms -x).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

#: The Azure Storage emulator the Azure tests run against (tests/support/azurite_server.py), pinned.
AZURITE_VERSION="3.37.0"

# Azurite (Microsoft's Azure Storage emulator, an npm package: about 2 minutes and 190 MB the first
# time) into $VENV/azurite, where tests/conftest.py looks for it. Idempotent: a second run only
# compares a stamp. Without npm the Azure tests are skipped; on CI (CI=true) they must run, so a
# missing npm or a failed install fails here, loudly.
ensure_azurite() {
  local dir="$VENV/azurite" stamp_file="$VENV/azurite/.sparkdl-installed" log
  if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$AZURITE_VERSION" ] &&
     [ -x "$dir/node_modules/.bin/azurite-blob" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
      echo "error: npm was not found, and CI runs the Azure storage tests against Azurite: install Node.js 18+ and npm" >&2
      exit 1
    fi
    echo "sparkdl: npm was not found: the Azure storage tests will be skipped (they need Azurite, installed with npm)" >&2
    return 0
  fi
  echo "sparkdl: installing Azurite $AZURITE_VERSION (the Azure Storage emulator) into $dir (first run: about 2 minutes)" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  log="$dir/npm-install.log"
  if npm install --prefix "$dir" --no-audit --no-fund --no-progress --loglevel=error \
       "azurite@$AZURITE_VERSION" >"$log" 2>&1 && [ -x "$dir/node_modules/.bin/azurite-blob" ]; then
    echo "$AZURITE_VERSION" > "$stamp_file"
    return 0
  fi
  if [ "${CI:-}" = "true" ]; then
    echo "error: installing Azurite $AZURITE_VERSION with npm failed; its output:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "sparkdl: installing Azurite with npm failed (see $log): the Azure storage tests will be skipped" >&2
}

ensure_azurite
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
