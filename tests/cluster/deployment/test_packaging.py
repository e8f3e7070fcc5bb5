"""The package as users get it, run as users run it: ``python -m build`` makes an sdist and a
wheel; the wheel, installed into a fresh virtual environment, runs ``sparkdl --version``; and the
digits demo (``scripts/demo.sh``'s job), from a directory outside the repository with nothing on
``PYTHONPATH`` pointing back at the checkout, is submitted with spark-submit to a real Spark
standalone cluster (a Master and two one-core Workers from pip's pyspark, ``standalone_cluster.py``)
where the installed wheel trains two TF nodes, one executor on each Worker; then the cluster stops
cleanly; and ``scripts/demo.sh`` runs as the README gives it, on its embedded local cluster. These
two demo runs are the slow tier's (``test_examples.py`` runs the demo's code on the suite's shared
Spark in every run).

Each TensorFlow extra of the wheel resolves to exactly one TensorFlow distribution (pip's dry run
into an empty venv, with this machine's package index).

The build works on a copy of the repository, so it never writes into the working tree; the wheel
goes into the fresh environment without its dependencies, which come from this run's environment
(``test_the_wheel_installs_into_a_fresh_venv`` says how).
"""

from __future__ import annotations

import json
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
from packaging.utils import canonicalize_name
from standalone_cluster import StandaloneCluster, listening

from sparkdl.__main__ import TENSORFLOW_DISTRIBUTIONS

ROOT = Path(__file__).resolve().parents[3]
# Slow as a cluster test: the build every test shares, a Spark standalone cluster, the demo on it.
pytestmark = [pytest.mark.timeout(1500), pytest.mark.cluster]

BUILD_TIMEOUT_S = 300
INSTALL_TIMEOUT_S = 900
RESOLVE_TIMEOUT_S = 240  # pip's dry run of one extra, here: cpu 5-14 s, tf-keras 7-21 s, gpu 15-50 s (warm-cold cache)
DEMO_TIMEOUT_S = 480
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
    import sparkdl

    version, distribution = sparkdl.__version__, sparkdl.__distribution__
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


def test_the_wheel_carries_py_typed_the_license_and_the_project_links(artifacts):
    """PEP 561's marker (type checkers read the package's hints), the Apache-2.0 text the metadata
    declares, and the project's links and classifiers for the index page."""
    sdist, wheel = artifacts
    with zipfile.ZipFile(wheel) as archive:
        wheel_files = set(archive.namelist())
        (license_path,) = [n for n in wheel_files if re.fullmatch(r"sparkdl_tf-[^/]+\.dist-info/licenses/LICENSE", n)]
        license_text = archive.read(license_path).decode()
    with tarfile.open(sdist) as archive:
        sdist_files = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert "sparkdl/py.typed" in wheel_files and "sparkdl/py.typed" in sdist_files
    assert "LICENSE" in sdist_files
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert license_text == (ROOT / "LICENSE").read_text()
    metadata = _wheel_metadata(wheel)
    assert re.search(r"^License-Expression: Apache-2\.0$", metadata, re.M), metadata[:800]
    assert re.search(r"^License-File: LICENSE$", metadata, re.M), metadata[:800]
    links = dict(re.findall(r"^Project-URL: ([^,]+), (\S+)$", metadata, re.M))
    assert set(links) == {"Homepage", "Documentation", "Source", "Issues", "Changelog"}, links
    assert re.search(r"^Classifier: Typing :: Typed$", metadata, re.M), metadata[:800]


@pytest.fixture(scope="module")
def venv(artifacts, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed (``--no-deps``, see
    ``test_the_wheel_installs_into_a_fresh_venv``); its directory."""
    _, wheel = artifacts
    venv = tmp_path_factory.mktemp("installed") / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent, timeout=120)
    python = venv / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--no-deps", str(wheel)],
        cwd=venv.parent,
        timeout=INSTALL_TIMEOUT_S,
    )
    venv_site = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=venv.parent, timeout=60
    ).strip()
    ours = sysconfig.get_paths()["purelib"]  # this run's environment: TensorFlow, PySpark, scikit-learn
    (Path(venv_site) / "zz_test_dependencies.pth").write_text(ours + "\n")
    return venv


def _venv_env(venv: Path) -> dict[str, str]:
    """The clean environment, with Spark's driver and executors on the fresh venv's Python."""
    python = str(venv / "bin" / "python")
    return _clean_env(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)


def test_the_wheel_installs_into_a_fresh_venv(artifacts, venv, tmp_path):
    """The wheel alone in a fresh venv: its files, entry point and metadata (the demo then runs
    from it in ``test_the_installed_demo_trains_two_tf_nodes_on_the_standalone_cluster``).

    The wheel goes in with ``--no-deps``; its heavy dependencies (TensorFlow, PySpark: about
    1.5 GB, which took CI about 8 minutes to install again) come from this test run's own
    environment, appended to the fresh venv's path by a ``.pth`` file. Only directories are
    appended (no ``.pth`` file of that environment runs), so ``sparkdl`` can only come from the
    wheel; the dependencies the wheel declares are checked against its metadata instead.
    """
    _, wheel = artifacts
    python = venv / "bin" / "python"
    requires = {
        line.split(":", 1)[1].strip()
        for line in _wheel_metadata(wheel).splitlines()
        if line.startswith("Requires-Dist:")
    }
    assert any(r.startswith("tensorflow-cpu") and 'extra == "cpu"' in r for r in requires), requires
    assert any(r.startswith("pyspark") for r in requires), requires

    env = _venv_env(venv)  # run outside the repository
    site_packages = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        cwd=tmp_path,
        timeout=60,
        env=env,
    ).strip()
    assert Path(site_packages).resolve().is_relative_to(venv.resolve()), site_packages

    imported = _run(
        [str(python), "-c", "import sparkdl; print(sparkdl.__file__)"], cwd=tmp_path, timeout=120, env=env
    ).strip()
    assert Path(imported).resolve() == (Path(site_packages) / "sparkdl" / "__init__.py").resolve(), imported

    report = _run([str(venv / "bin" / "sparkdl"), "--version"], cwd=tmp_path, timeout=120, env=env)
    first = report.splitlines()[0]
    assert first.startswith("sparkdl:") and str(Path(site_packages) / "sparkdl") in first, report
    assert re.match(r"sparkdl:\s+\S+ \(sparkdl-tf \S+, ", first), report  # the distribution it came from
    assert re.search(rf"^python:\s+\S+ \({re.escape(str(python))}\)$", report, re.M), report
    assert re.search(r"^tensorflow:\s+.*2\.21\.", report, re.M), report
    assert re.search(r"^node keras:\s+Keras 3\.15\.", report, re.M), report  # TensorFlow's default, pinned


def _would_install(wheel: Path, extra: str, tmp_path: Path) -> dict[str, str]:
    """``{distribution: version}`` that ``pip install "WHEEL[EXTRA]"`` would put into an empty venv:
    pip's dry run (``--report``) with this machine's package index configuration (pip's config files
    and ``PIP_*``), which this run's pip reads as the venv's pip would."""
    empty = tmp_path / "empty"
    _run([sys.executable, "-m", "venv", "--without-pip", str(empty)], cwd=tmp_path, timeout=120)
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", "--python", str(empty / "bin" / "python"), "--disable-pip-version-check"]
    _run(
        [*pip, "install", "--quiet", "--dry-run", "--report", str(report), f"{wheel}[{extra}]"],
        tmp_path,
        RESOLVE_TIMEOUT_S,
    )
    installs = json.loads(report.read_text())["install"]
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in installs}


@pytest.mark.timeout(RESOLVE_TIMEOUT_S + BUILD_TIMEOUT_S)
@pytest.mark.parametrize(
    ("extra", "tensorflow", "keras"),
    [
        ("cpu", "tensorflow-cpu", "keras"),
        ("tf-keras", "tensorflow", "tf-keras"),
        pytest.param("gpu", "tensorflow", "keras", marks=pytest.mark.slow),  # the CUDA wheels: up to 50 s
    ],
)
def test_each_tensorflow_extra_installs_exactly_one_tensorflow(artifacts, tmp_path, extra, tensorflow, keras):
    """Two TensorFlow distributions unpack into one ``tensorflow`` folder (tf-keras, for one, depends
    on ``tensorflow``, which would join tensorflow-cpu): each extra resolves to exactly one."""
    _, wheel = artifacts
    installs = _would_install(wheel, extra, tmp_path)
    tensorflows = {name for name in installs if name in TENSORFLOW_DISTRIBUTIONS}
    assert tensorflows == {tensorflow}, sorted(installs)
    assert installs[tensorflow].startswith("2.21."), installs[tensorflow]
    assert {"sparkdl-tf", keras} <= set(installs), sorted(installs)
    if keras == "keras":
        assert "tf-keras" not in installs, sorted(installs)  # Keras 3 only: tf-keras would bring tensorflow


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A running standalone cluster with two one-core Workers, for this module's last two tests;
    stopped at teardown (killed if need be), so a failing test leaves no process behind. Its
    daemons, so their executors too, have the clean environment (nothing points at the checkout)."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, environ=_clean_env())
    try:
        cluster.start()
        cluster.wait_for(lambda status: sum(w["state"] == "ALIVE" for w in status["workers"]) == 2, "2 ALIVE workers")
        yield cluster
    finally:
        cluster.stop()


def _submit(cluster: StandaloneCluster, venv: Path, work: Path, script: str, *args: str) -> str:
    """spark-submit ``script`` (in ``work``, run there) to the standalone Master with the venv's
    Python as driver and executors, one core per executor, two executors; returns its stdout after
    checking that the application ran there, an executor on each Worker."""
    before = {app["id"] for app in cluster.state()["completedapps"]}
    command = [
        str(Path(sys.executable).parent / "spark-submit"),  # pyspark's, found through the venv's path too
        "--master",
        cluster.master_url,
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        "spark.cores.max=2",
        "--conf",
        "spark.task.cpus=1",
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.ui.enabled=false",
        str(work / script),
        *args,
    ]
    env = dict(_venv_env(venv), SPARK_HOME=cluster.env["SPARK_HOME"], SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}\n{cluster.logs()}"
    # The application ran on this Master (not on a cluster the script made up), one executor per Worker.
    status = cluster.wait_for(
        lambda s: {a["id"] for a in s["completedapps"]} - before,
        "completed application on this Master (did the script keep spark-submit's --master?)",
        60,
    )
    (app,) = [a for a in status["completedapps"] if a["id"] not in before]
    assert app["state"] == "FINISHED", app
    executor_dirs = sorted((cluster.base / "work").glob(f"worker*/{app['id']}/*"))
    assert {d.parent.parent.name for d in executor_dirs} == {"worker0", "worker1"}, executor_dirs
    return result.stdout


def _accuracy(stdout: str, rows: int) -> float:
    match = re.search(rf"test accuracy \(distributed inference over {rows} rows\): ([0-9.]+)", stdout)
    assert match, stdout
    return float(match.group(1))


@pytest.mark.slow  # a Spark standalone cluster and a spark-submit application of its own: 110 s here
@pytest.mark.timeout(600)
def test_the_installed_demo_trains_two_tf_nodes_on_the_standalone_cluster(venv, standalone, tmp_path):
    """The demo (scripts/demo.sh's job) as spark-submit runs it on a real cluster, from the installed
    wheel and outside the repository, with Spark ML's MLP beside it."""
    status = standalone.state()
    assert status["status"] == "ALIVE" and status["url"] == standalone.master_url
    assert sorted(w["cores"] for w in status["workers"]) == [1, 1]
    work = tmp_path / "run"  # outside the repository, with the example scripts only
    work.mkdir()
    for script in (ROOT / "examples" / "mnist").glob("*.py"):
        shutil.copy(script, work)
    stdout = _submit(standalone, venv, work, "mnist_tf.py", "--epochs", "3", "--export_dir", str(tmp_path / "export"))
    assert "trained on 2 TF nodes" in stdout
    assert (tmp_path / "export" / "saved_model.pb").exists()
    assert _accuracy(stdout, 360) > 0.8
    # Spark ML's best built-in fit for the task, on the same split, printed beside sparkdl's CNN.
    assert re.search(r"sparkdl, CNN on 2 TF nodes: +accuracy 0\.\d{4}", stdout), stdout
    assert re.search(r"Spark ML, MLP 64-128-10: +accuracy 0\.\d{4}", stdout), stdout
    # The console is for people: TensorFlow's C++ and INFO lines stay in the node logs.
    assert not re.search(r"^\[\w+:\d\] [IWE]\d{4} \d\d:|INFO tensorflow:|absl::InitializeLog", stdout, re.M), stdout


@pytest.mark.slow  # the standalone cluster above, which only the slow tier starts
@pytest.mark.timeout(180)
def test_the_standalone_cluster_stops_cleanly(standalone):
    """SIGTERM stops the Workers and the Master, their children too, and frees every port."""
    assert {p.poll() for p in standalone.processes.values()} == {None}  # all running until now
    assert standalone.stop() == []
    assert all(p.poll() is not None for p in standalone.processes.values())
    assert [port for port in standalone.ports if listening(port)] == []


@pytest.mark.slow  # an application of its own: the demo's embedded local-cluster, about 2 minutes here
@pytest.mark.timeout(900)
def test_scripts_demo_sh_runs_as_the_readme_says(tmp_path):
    """The README's first command as written, ``scripts/demo.sh`` without arguments: the demo on
    its embedded ``local-cluster[2,1,1024]`` (the one path the standalone run above does not take),
    with Spark ML's MLP beside it. TMPDIR is this test's, so the default export lands there."""
    env = _clean_env(TMPDIR=str(tmp_path))
    env["SPARK_CONF_DIR"] = os.environ["SPARK_CONF_DIR"]  # the suite's JVM flags (support/spark_conf)
    stdout = _run(["bash", str(ROOT / "scripts" / "demo.sh")], cwd=tmp_path, timeout=DEMO_TIMEOUT_S, env=env)
    assert re.search(r"trained on 2 TF nodes in [0-9.]+ s; model in .*sparkdl_mnist_export", stdout), stdout
    assert (tmp_path / "sparkdl_mnist_export" / "saved_model.pb").exists()
    assert _accuracy(stdout, 360) > 0.9
    assert re.search(r"sparkdl, CNN on 2 TF nodes: +accuracy 0\.\d{4}", stdout), stdout
    assert re.search(r"Spark ML, MLP 64-128-10: +accuracy 0\.\d{4}", stdout), stdout
