"""The package as users get it: ``python -m build`` makes an sdist and a wheel, and the wheel,
installed into a fresh virtual environment, runs ``sparkdl --version`` and the digits demo from a
directory outside the repository (nothing on ``PYTHONPATH`` points back at the checkout).

The build works on a copy of the repository, so it never writes into the working tree; the
fresh environment installs ``sparkdl-tf[cpu]`` (plus scikit-learn for the demo's data) through pip,
whose caches keep repeated runs quick.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Slow as a cluster test: the build all three share, and the demo on Spark the last one runs.
pytestmark = [pytest.mark.timeout(1500), pytest.mark.cluster]

BUILD_TIMEOUT_S = 300
INSTALL_TIMEOUT_S = 900
DEMO_TIMEOUT_S = 600
_COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".ipynb_checkpoints",
    "spark-warehouse",
    "metastore_db",
    "demo_output",
    "work",
)


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that points Python or Spark at the checkout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME") and not k.startswith("PYSPARK_")
    }
    env.update(extra)
    return env


def _run(command: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, env=env or _clean_env(), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{command} exited with {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
    )
    return result.stdout


def _package_modules() -> set[str]:
    """``sparkdl/...py`` paths of every module in the checkout."""
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "sparkdl").rglob("*.py") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """``(sdist, wheel)`` built by ``python -m build`` from a copy of the repository."""
    work = tmp_path_factory.mktemp("build")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=_COPY_IGNORE)
    out = work / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(source)], cwd=work, timeout=BUILD_TIMEOUT_S)
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return sdists[0], wheels[0]


def test_sdist_and_wheel_hold_every_module_and_no_tests(artifacts):
    sdist, wheel = artifacts
    with tarfile.open(sdist) as archive:
        # Members are "sparkdl_tf-<version>/<path>"; drop the top directory.
        sdist_files = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    with zipfile.ZipFile(wheel) as archive:
        wheel_files = set(archive.namelist())
    modules = _package_modules()
    assert len(modules) > 20, modules
    assert modules <= sdist_files, sorted(modules - sdist_files)
    assert modules <= wheel_files, sorted(modules - wheel_files)
    for files in (sdist_files, wheel_files):
        assert not [f for f in files if f.startswith("tests/") or "/tests/" in f or f.startswith("test_")], files
        assert not [f for f in files if f.endswith(".pyc")]
    assert "pyproject.toml" in sdist_files and "README.md" in sdist_files


def _wheel_metadata(wheel: Path) -> str:
    """The METADATA file of the wheel's dist-info."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode()


def test_wheel_metadata_has_the_single_source_version_and_the_console_script(artifacts):
    _, wheel = artifacts
    namespace: dict = {}
    exec((ROOT / "sparkdl" / "_version.py").read_text(), namespace)
    version, distribution = namespace["__version__"], namespace["__distribution__"]
    assert distribution == "sparkdl-tf"  # PyPI's "sparkdl" is another project; the import stays sparkdl
    assert wheel.name.startswith(f"sparkdl_tf-{version}-"), wheel.name
    assert 'dynamic = ["version"]' in (ROOT / "pyproject.toml").read_text()
    with zipfile.ZipFile(wheel) as archive:
        info = f"sparkdl_tf-{version}.dist-info"
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        top_level = {name.split("/")[0] for name in archive.namelist() if not name.startswith(info)}
    metadata = _wheel_metadata(wheel)
    assert top_level == {"sparkdl"}, top_level  # the module keeps its name
    assert re.search(r"^Name: sparkdl-tf$", metadata, re.M), metadata[:500]
    assert re.search(rf"^Version: {re.escape(version)}$", metadata, re.M), metadata[:500]
    assert re.search(r"^Provides-Extra: cpu$", metadata, re.M)
    assert re.search(r"^sparkdl = sparkdl\.__main__:main$", entry_points, re.M), entry_points


def test_wheel_installs_into_a_fresh_venv_and_runs_the_demo(artifacts, tmp_path):
    """The wheel alone in a fresh venv: its files, entry point and metadata, and the demo run from it.

    The wheel goes in with ``--no-deps``; its heavy dependencies (TensorFlow, PySpark: about
    1.5 GB, which took CI about 8 minutes to install again) come from this test run's own
    environment, appended to the fresh venv's path by a ``.pth`` file. Only directories are
    appended (no ``.pth`` file of that environment runs), so ``sparkdl`` can only come from the
    wheel; the dependencies the wheel declares are checked against its metadata instead.
    """
    _, wheel = artifacts
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, timeout=120)
    python = venv / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--no-deps", str(wheel)],
        cwd=tmp_path,
        timeout=INSTALL_TIMEOUT_S,
    )
    requires = {
        line.split(":", 1)[1].strip()
        for line in _wheel_metadata(wheel).splitlines()
        if line.startswith("Requires-Dist:")
    }
    assert any(r.startswith("tensorflow-cpu") and 'extra == "cpu"' in r for r in requires), requires
    assert any(r.startswith("pyspark") for r in requires), requires
    venv_site = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path, timeout=60
    ).strip()
    ours = sysconfig.get_paths()["purelib"]  # this run's environment: TensorFlow, PySpark, scikit-learn
    (Path(venv_site) / "zz_test_dependencies.pth").write_text(ours + "\n")

    work = tmp_path / "run"  # outside the repository, with the example scripts only
    work.mkdir()
    for script in (ROOT / "examples" / "mnist").glob("*.py"):
        shutil.copy(script, work)
    env = _clean_env(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    site_packages = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=work, timeout=60, env=env
    ).strip()
    assert Path(site_packages).resolve().is_relative_to(venv.resolve()), site_packages

    imported = _run(
        [str(python), "-c", "import sparkdl; print(sparkdl.__file__)"], cwd=work, timeout=120, env=env
    ).strip()
    assert Path(imported).resolve() == (Path(site_packages) / "sparkdl" / "__init__.py").resolve(), imported

    report = _run([str(venv / "bin" / "sparkdl"), "--version"], cwd=work, timeout=120, env=env)
    first = report.splitlines()[0]
    assert first.startswith("sparkdl:") and str(Path(site_packages) / "sparkdl") in first, report
    assert re.match(r"sparkdl:\s+\S+ \(sparkdl-tf \S+, ", first), report  # the distribution it came from
    assert re.search(rf"^python:\s+\S+ \({re.escape(str(python))}\)$", report, re.M), report
    assert re.search(r"^tensorflow:\s+.*2\.21\.", report, re.M), report
    assert re.search(r"^node keras:\s+tf-keras 2\.21\.", report, re.M), report

    stdout = _run(
        [str(python), "mnist_tf.py", "--epochs", "2", "--no_baseline", "--export_dir", str(tmp_path / "export")],
        cwd=work,
        timeout=DEMO_TIMEOUT_S,
        env=env,
    )
    assert "trained on 2 TF nodes" in stdout, stdout
    match = re.search(r"test accuracy \(distributed inference over 360 rows\): ([0-9.]+)", stdout)
    assert match, stdout
    assert float(match.group(1)) > 0.5, stdout  # 10 classes: chance is 0.1
