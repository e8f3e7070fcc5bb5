#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: check Java, then create or update the
# project's virtual environment in .venv. Idempotent: a second run only compares a stamp.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SPARKDL_VENV:-$ROOT/.venv}"
EXTRAS="${SPARKDL_EXTRAS:-cpu,dev}"

check_java() {
  local java_bin version major
  java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  if ! command -v "$java_bin" >/dev/null 2>&1; then
    echo "error: Java was not found. PySpark 4 needs Java 17 or newer: install it (e.g." >&2
    echo "       'apt-get install openjdk-17-jre-headless') or set JAVA_HOME." >&2
    exit 1
  fi
  version="$("$java_bin" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
  major="${version%%.*}"
  if [ -z "$major" ] || [ "$major" -lt 17 ]; then
    echo "error: Java $version found at $(command -v "$java_bin"); PySpark 4 needs Java 17 or newer." >&2
    exit 1
  fi
}

pick_python() {
  local candidate
  for candidate in "${SPARKDL_PYTHON:-}" python3.11 python3.12 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))'; then
      echo "$candidate"; return
    fi
  done
  echo "error: no Python 3.10-3.13 found (TensorFlow 2.21 supports these)" >&2
  exit 1
}

# The requirements of pyproject.toml's extra $1, one per line (pyproject.toml is where they are written).
extra_requirements() {
  "$VENV/bin/python" - "$ROOT/pyproject.toml" "$1" <<'PY'
import sys

try:
    import tomllib
except ImportError:  # Python 3.10: the copy pip vendors
    from pip._vendor import tomli as tomllib
with open(sys.argv[1], "rb") as pyproject:
    print("\n".join(tomllib.load(pyproject)["project"]["optional-dependencies"][sys.argv[2]]))
PY
}

# pip install, quiet and without compiling (ensure_venv compiles afterwards, on every core); pip's
# failure is the function's (pipefail), whatever the filter of its noise finds.
pip_install() {
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "$@" 2>&1 |
    { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }
}

ensure_venv() {
  local stamp_file want
  if [ ! -x "$VENV/bin/python" ]; then
    echo "sparkdl: creating the virtual environment in $VENV" >&2
    "$(pick_python)" -m venv "$VENV"
  fi
  stamp_file="$VENV/.sparkdl-installed"
  want="$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" | sha256sum | cut -d' ' -f1) $EXTRAS"
  if [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$want" ]; then
    echo "sparkdl: installing sparkdl-tf[$EXTRAS] and its dependencies into $VENV (first run takes minutes)" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
    # This checkout was installed as "sparkdl" before its distribution became sparkdl-tf: drop that.
    "$VENV/bin/python" -m pip uninstall --quiet --disable-pip-version-check -y sparkdl >/dev/null 2>&1 || true
    pip_install -e "$ROOT${EXTRAS:+[$EXTRAS]}"
    if [[ ",$EXTRAS," == *,dev,* ]]; then
      # The tests run tf-keras paths too. tf-keras names "tensorflow" as its dependency, so pip would
      # add TensorFlow's CUDA build (a 570 MB wheel) to the cpu extra's tensorflow-cpu, both unpacked
      # into one site-packages/tensorflow, and each TensorFlow import would cost about 1 CPU-second
      # more: tf-keras (the tf-keras extra's pin) goes in without its dependencies, beside whichever
      # TensorFlow the other extras installed.
      local requirement keras=()
      while IFS= read -r requirement; do
        if [[ "$requirement" == tf-keras* ]]; then keras+=("$requirement"); fi
      done < <(extra_requirements tf-keras)
      pip_install --no-deps "${keras[@]}"
    fi
    # Byte-compiled on every core afterwards rather than by pip one file at a time (the whole
    # install: 119 s against 141 s on 2 cores). Compiled it must be: where PYTHONDONTWRITEBYTECODE
    # is set (as on CI), nothing caches a compiled module, and each TensorFlow import would
    # compile its own. (A package may ship files that are not Python 3, e.g. templates:
    # those stay uncompiled, as under pip.) The packages' own test suites (tests/ and test/
    # folders, which nothing here imports) are left out: 7 s of the 41 here.
    "$VENV/bin/python" -m compileall -q -j 0 -x '/tests?/' \
      "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null 2>&1 || true
    # TensorFlow is looked for, not imported: its import alone costs about 8 s here.
    "$VENV/bin/python" -c "import importlib.util, sparkdl, pyspark; assert importlib.util.find_spec('tensorflow')" \
      >/dev/null 2>&1 || { echo "error: the installation in $VENV is incomplete (see pip's output above)" >&2; exit 1; }
    echo "$want" > "$stamp_file"
  fi
  export PYSPARK_PYTHON="$VENV/bin/python"
  export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
}

check_java
ensure_venv
