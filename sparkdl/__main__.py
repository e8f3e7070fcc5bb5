"""``python -m sparkdl`` / ``sparkdl --version``: versions of the stack, for support questions."""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def report() -> str:
    """A few lines naming the versions sparkdl runs with."""
    from . import __version__

    java = shutil.which("java")
    java_version = "not found"
    if java:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
        java_version = (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "unknown"
    lines = [f"sparkdl {__version__}"]
    for dist in ("pyspark", "tensorflow", "tensorflow-cpu", "tf-keras", "keras", "pyarrow", "pandas"):
        lines.append(f"{dist} {_version(dist)}")
    lines.append(f"java: {java_version}")
    lines.append(f"nvidia-smi: {shutil.which('nvidia-smi') or 'not found'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the version report."""
    parser = argparse.ArgumentParser(prog="sparkdl", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print versions (the default action)")
    parser.parse_args(argv)
    print(report())


if __name__ == "__main__":
    main()
