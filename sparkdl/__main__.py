"""``sparkdl --version`` / ``python -m sparkdl``: a quick check of the stack sparkdl runs on.

Prints one ``name: value`` line per component (sparkdl and where it was imported from, Python,
PySpark/Spark, TensorFlow, tf-keras, Keras, the Keras that TF nodes started from this
environment will use, pyarrow, pandas, Java, GPUs) and then ``note:`` lines for problems worth
fixing before running a cluster. It is fast: TensorFlow is not imported unless ``--check-tf``
is given, which imports it the way a node would and lists the devices it sees.

The report describes *this* machine's environment; executors run whatever Python
``PYSPARK_PYTHON`` (``spark.pyspark.python``) names, so run it there too when in doubt, e.g.
``/path/to/executor/python -m sparkdl``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .common.timeouts import COMMAND_TIMEOUT_S

SUPPORTED_PYTHON = ((3, 10), (3, 13))
MIN_JAVA = 17


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _minor(version: str | None) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _run(command: list[str]) -> tuple[int | None, str]:
    """Run a short command; ``(exit status or None if it could not run, stdout + stderr)``."""
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    return out.returncode, (out.stdout or "") + (out.stderr or "")


def _java() -> tuple[str, str | None]:
    """``(report line, problem or None)`` for the Java that PySpark will start (JAVA_HOME first)."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={java_home}" if java_home else "PATH"
        return "not found", f"no java on {where}: PySpark 4 needs Java {MIN_JAVA} or newer"
    status, output = _run([java, "-version"])
    first = next((line.strip() for line in output.splitlines() if line.strip()), "")
    if status != 0 or not first:
        return f"{java} failed: {first or status}", f"{java} -version failed"
    line = f"{first} ({java})"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', first)
    if match:
        major = int(match.group(1))
        major = int(match.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8
        if major < MIN_JAVA:
            return line, f"Java {major} found; PySpark 4 needs Java {MIN_JAVA} or newer"
    return line, None


def _spark() -> str:
    """PySpark's version, and the Spark installation SPARK_HOME points at, if any."""
    text = _version("pyspark") or "not installed"
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        release = Path(spark_home) / "RELEASE"
        try:
            first = release.read_text().splitlines()[0].strip()
        except (OSError, IndexError):
            first = "no RELEASE file"
        text += f"; SPARK_HOME={spark_home} ({first})"
    return text


#: The distributions that ship TensorFlow's ``tensorflow`` package (or a shim that pulls one in).
TENSORFLOW_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-intel",
    "tensorflow-macos",
    "tensorflow-cpu-aws",
    "intel-tensorflow",
    "tf-nightly",
    "tf-nightly-cpu",
)


def _tensorflow() -> str | None:
    found = [f"{dist} {v}" for dist in TENSORFLOW_DISTRIBUTIONS if (v := _version(dist))]
    return ", ".join(found) or None


def _ships_tensorflow(dist: str) -> bool:
    """Whether ``dist`` puts files into the ``tensorflow`` package (a shim that only pulls in another
    build does not); a distribution without a RECORD counts."""
    record = importlib.metadata.distribution(dist).read_text("RECORD")
    return record is None or any(line.startswith("tensorflow/") for line in record.splitlines())


def _tensorflow_builds_problem() -> str | None:
    """A problem if two TensorFlow builds are installed: they share the ``tensorflow`` folder."""
    installed = [dist for dist in TENSORFLOW_DISTRIBUTIONS if _version(dist)]
    if len(installed) < 2:
        return None
    builds = [dist for dist in installed if _ships_tensorflow(dist)]
    if len(builds) < 2:
        return None
    listed = ", ".join(f"{dist} {_version(dist)}" for dist in builds)
    return (
        f"{len(builds)} TensorFlow builds are installed ({listed}): they unpack into the same tensorflow "
        "folder, one's files over another's. Keep one: pip uninstall -y " + " ".join(builds) + ", then "
        "reinstall the one you want (uninstalling one alone deletes the files they share); sparkdl-tf's cpu "
        "extra installs tensorflow-cpu alone, its tf-keras extra tensorflow (never add both extras)"
    )


def _node_keras(tf_keras: str | None, keras: str | None) -> tuple[str, list[str]]:
    """Which Keras ``tf.keras`` will be in TF nodes started from this environment, and problems."""
    from .node import keras_policy

    env = dict(os.environ)
    if keras_policy.LEGACY_KERAS_ENV in env:
        setting = f"{keras_policy.LEGACY_KERAS_ENV}={env[keras_policy.LEGACY_KERAS_ENV]}, set in this environment"
    else:
        setting = f"{keras_policy.LEGACY_KERAS_ENV} unset: TensorFlow's default"
    warnings, error = keras_policy.startup_problems(env, num_workers=2)
    problems = warnings + ([error] if error else [])
    if keras_policy.legacy_keras_enabled(env):
        return f"tf-keras {tf_keras or '(not installed)'} ({setting})", problems
    return f"Keras {keras or '3 (not installed)'} ({setting})", problems


def _gpus() -> str:
    """How many NVIDIA GPUs ``nvidia-smi -L`` lists, and CUDA_VISIBLE_DEVICES."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    suffix = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "; CUDA_VISIBLE_DEVICES unset"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA GPU visible (nvidia-smi not found)" + suffix
    status, output = _run([smi, "-L"])
    if status != 0:
        return f"no NVIDIA GPU visible (nvidia-smi -L failed: {output.strip()[-200:]})" + suffix
    count = sum(1 for line in output.splitlines() if line.startswith("GPU "))
    if count == 0:
        return "no NVIDIA GPU visible (nvidia-smi lists none)" + suffix
    return f"{count} NVIDIA GPU{'s' if count != 1 else ''} (nvidia-smi -L)" + suffix


def _other_sparkdl(ours: str) -> str | None:
    """The version of a distribution named ``sparkdl`` that is another project, if one is installed
    (this project's own metadata from before it was renamed does not count)."""
    try:
        other = importlib.metadata.distribution("sparkdl")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        summary = importlib.metadata.metadata(ours)["Summary"]
    except importlib.metadata.PackageNotFoundError:
        summary = None
    return None if summary and other.metadata["Summary"] == summary else other.version


def _sparkdl_row(version: str, package_dir: Path, notes: list[str]) -> str:
    """sparkdl's version, the distribution it was installed as, and where it was imported from."""
    from . import __distribution__

    installed = _version(__distribution__)
    where = f"{__distribution__} {installed}" if installed else f"not installed as {__distribution__}"
    other = _other_sparkdl(__distribution__)
    if other:  # PyPI's sparkdl (spark-deep-learning) or Databricks Runtime ML's: another project
        notes.append(
            f"a distribution named 'sparkdl' ({other}) is also installed: it is another project (PyPI's "
            "spark-deep-learning, or Databricks Runtime ML's HorovodRunner) whose 'sparkdl' module clashes "
            f"with this one; uninstall it or use another environment ({__distribution__}: see "
            "docs/deployment.md)"
        )
    return f"{version} ({where}, {package_dir})"


def collect() -> tuple[list[tuple[str, str]], list[str]]:
    """``(rows, notes)``: the ``(name, value)`` report rows and the problems found (possibly none)."""
    from . import __version__

    notes: list[str] = []
    package_dir = Path(__file__).resolve().parent
    rows = [("sparkdl", _sparkdl_row(__version__, package_dir, notes))]

    python = f"{platform.python_version()} ({sys.executable})"
    rows.append(("python", python))
    low, high = SUPPORTED_PYTHON
    if not low <= sys.version_info[:2] <= high:
        notes.append(
            f"Python {platform.python_version()} is outside {low[0]}.{low[1]}-{high[0]}.{high[1]}, "
            "the versions TensorFlow 2.21 supports"
        )

    rows.append(("pyspark", _spark()))
    tensorflow = _tensorflow()
    rows.append(("tensorflow", tensorflow or "not installed"))
    tf_keras, keras = _version("tf-keras"), _version("keras")
    rows.append(("tf-keras", tf_keras or "not installed"))
    rows.append(("keras", keras or "not installed"))
    if tensorflow is None:
        notes.append(
            "TensorFlow is not installed here: fine for a driver-only install, but executors need "
            "it (sparkdl-tf's cpu or gpu extra, e.g. pip install -e '.[cpu]' in a clone)"
        )
    else:
        builds_problem = _tensorflow_builds_problem()
        if builds_problem:
            notes.append(builds_problem)
        tf_minor = _minor(tensorflow.split(",")[0].split()[-1])
        if tf_keras and _minor(tf_keras) != tf_minor:
            notes.append(
                f"tf-keras {tf_keras} does not match TensorFlow ({tensorflow}); install the tf-keras "
                "release with the same minor version"
            )
    node_keras, keras_problems = _node_keras(tf_keras, keras)
    rows.append(("node keras", node_keras))
    if tensorflow is not None:
        notes += keras_problems

    for dist in ("pyarrow", "pandas", "numpy"):
        rows.append((dist, _version(dist) or "not installed"))

    java, java_problem = _java()
    rows.append(("java", java))
    if java_problem:
        notes.append(java_problem)
    rows.append(("gpus", _gpus()))
    return rows, notes


def report() -> str:
    """The report as text: one ``name: value`` line per component, then ``note:`` lines."""
    rows, notes = collect()
    width = max(len(name) for name, _ in rows)
    lines = [f"{name + ':':<{width + 1}} {value}" for name, value in rows]
    lines += [f"note: {note}" for note in notes] or ["note: no problems found"]
    return "\n".join(lines)


def check_tensorflow() -> str:
    """Import TensorFlow as a TF node would (Keras choice applied first); its version and devices."""
    import tensorflow as tf

    from .node import keras_policy

    keras_policy.prepare_node(os.environ, num_workers=2)  # what a multi-worker node checks and installs

    keras_module = tf.keras.__name__.split(".")[0]
    keras_version = _version("tf-keras" if keras_module == "tf_keras" else "keras") or "?"
    devices = tf.config.list_physical_devices()
    lines = [
        f"tf check: tensorflow {tf.__version__} imported; tf.keras is {keras_module} {keras_version}",
        f"tf check: built with CUDA: {tf.test.is_built_with_cuda()}",
        f"tf check: {len(devices)} device(s): " + ", ".join(f"{d.name} ({d.device_type})" for d in devices),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the report (and, with ``--check-tf``, TensorFlow's devices); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="sparkdl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="store_true", help="print the report (the default action)")
    parser.add_argument(
        "--check-tf",
        action="store_true",
        help="also import TensorFlow as a node would and list the devices it sees (slow)",
    )
    args = parser.parse_args(argv)
    print(report(), flush=True)
    if args.check_tf:
        try:
            print(check_tensorflow(), flush=True)
        except Exception as exc:  # noqa: BLE001 - reported, not raised: this is a diagnostic
            print(f"tf check: importing TensorFlow failed: {type(exc).__name__}: {exc}", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
