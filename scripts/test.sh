#!/usr/bin/env bash
# The test suite on a real multi-executor local Spark cluster. Extra arguments go to pytest
# (e.g. scripts/test.sh -k mwms -x).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
