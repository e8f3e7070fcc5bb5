"""Shared fixtures: a real multi-executor Spark (``local-cluster``), never ``local[N]``.

``local-cluster[N,1,1024]`` starts N separate executor JVMs on this machine, each with one
task slot, like a small standalone cluster. One SparkContext is kept for the whole session
and restarted only when a test needs a different number of executors.

The layout: ``unit/<room>/`` holds every test that starts no Spark, TF node or TensorFlow (the
rooms of ``sparkdl/``, plus ``faces`` and ``project``), ``cluster/<scenario>/`` every test that
does (marker ``cluster``), ``support/`` the helper modules several folders share, ``gpu/`` the
GPU suite. ``pytest_collection_modifyitems`` refuses a test in the wrong tree, naming it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
#: Every folder of tests/ that holds Python modules. Modules are imported by their basename
#: (no ``__init__.py``; basenames are unique across the tree), from any folder: a test imports
#: ``node_functions`` from ``support/`` or ``feed_functions`` from ``cluster/spark_mode/``.
TEST_FOLDERS = sorted({path.parent for path in TESTS_DIR.rglob("*.py")})
sys.path[:0] = [str(folder) for folder in TEST_FOLDERS if str(folder) not in sys.path]
# Executors must run this interpreter (with sparkdl installed) and import the test modules
# that map_fun closures refer to (cloudpickle pickles module-level functions by reference).
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join([*map(str, TEST_FOLDERS), *filter(None, [os.environ.get("PYTHONPATH")])])
# Every Spark the suite starts reads its defaults from here: C1-only JIT and the serial collector
# for short-lived JVMs (support/spark_conf/spark-defaults.conf says why and what it saves).
os.environ.setdefault("SPARK_CONF_DIR", str(TESTS_DIR / "support" / "spark_conf"))


class SparkHolder:
    """Keeps at most one SparkSession alive and switches executor counts (and shapes) on demand.

    Every executor it starts has ``executor_tmpdir`` as its TMPDIR (``spark.executorEnv.TMPDIR``),
    a directory the driver does not use, as on a real cluster where a node's files are on another
    host: ``test_node_paths.py`` watches it on the shared ``sc2`` instead of a Spark of its own."""

    def __init__(self, executor_tmpdir: str):
        self.spark = None
        self.key = None
        self.executor_tmpdir = executor_tmpdir

    def get(self, executors: int, conf: dict[str, str] | None = None, cores: int = 1, memory_mb: int = 1024):
        """A SparkContext on ``local-cluster[executors,cores,memory_mb]`` with extra ``conf``
        (restarts if any of them differs)."""
        from pyspark.sql import SparkSession

        key = (executors, cores, memory_mb, tuple(sorted((conf or {}).items())))
        if self.spark is not None and self.key == key:
            return self.spark.sparkContext
        self.stop()
        builder = (
            SparkSession.builder.master(f"local-cluster[{executors},{cores},{memory_mb}]")
            .appName(f"sparkdl-tests-{executors}")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        )
        for name, value in {"spark.executorEnv.TMPDIR": self.executor_tmpdir, **(conf or {})}.items():
            builder = builder.config(name, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.key = key
        return self.spark.sparkContext

    def stop(self):
        if self.spark is not None:
            self.spark.stop()
            self.spark = None
            self.key = None


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the slow tier (tests marked slow: whole Spark applications as users start them, soak "
        "and scale tests: what cannot be made short)",
    )


def pytest_report_header(config):
    if not config.getoption("--slow"):
        return "slow tier (marker 'slow') left out: scripts/test.sh --slow runs it too"


def pytest_collection_modifyitems(config, items):
    """Mark ``cluster`` every test that starts Spark through ``spark_holder`` (which ``sc2``,
    ``sc3`` and every fixture built on them use); tests that start Spark, a TF node or
    TensorFlow another way carry the mark themselves. ``scripts/test.sh -m "not cluster"``
    runs the rest, which is what ``tests/unit/`` holds (``layout_problems``)."""
    for item in items:
        if "spark_holder" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)
    misplaced = layout_problems(items)
    if misplaced:
        raise pytest.UsageError("tests in the wrong tree:\n  " + "\n  ".join(misplaced))
    if not config.getoption("--slow"):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]
    items.sort(key=_spark_shape_group)  # stable: module order is kept within each group


def layout_problems(items) -> list[str]:
    """Each test whose place disagrees with its ``cluster`` mark, named: a test under
    ``tests/unit/`` must start no Spark, TF node or TensorFlow, and every other test must
    (``scripts/test.sh tests/unit`` runs exactly what ``-m "not cluster"`` runs)."""
    problems = []
    for item in items:
        try:
            tree = Path(item.path).resolve().relative_to(TESTS_DIR).parts[0]
        except ValueError:
            continue  # not under tests/
        cluster = item.get_closest_marker("cluster") is not None
        if tree == "unit" and cluster:
            problems.append(
                f"{item.nodeid}: a cluster test (Spark, a TF node or TensorFlow) under tests/unit/: "
                "move it to tests/cluster/<scenario>/"
            )
        elif tree != "unit" and not cluster:
            problems.append(
                f"{item.nodeid}: not a cluster test, outside tests/unit/: move it to tests/unit/<room>/ "
                "(or mark it pytest.mark.cluster if it starts Spark, a TF node or TensorFlow)"
            )
    return problems


def _spark_shape_group(item) -> tuple[int, bool]:
    """Tests grouped by the SparkContext they need, so the session's one Spark restarts as
    seldom as possible (each restart of local-cluster costs about 20 s of JVM start here):
    tests without the shared Spark first (the standalone cluster, the packaged demo, the
    Connect-free applications run as subprocesses: they start their own Spark and get the
    memory to themselves), then every ``sc2`` test, every ``sc3`` test, then the tests
    that ask ``spark_holder`` for a shape of their own (other settings, or a Spark they stop),
    and last those that read a run started with the session (``connect_ci_run``), by then done.
    A test marked ``stops_spark`` (it leaves its shape's Spark unusable, e.g. kills an executor, and
    stops it) comes last in its shape's group, so that shape is never started twice."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if "connect_ci_run" in fixtures:
        group = 4
    elif "spark_holder" not in fixtures:
        group = 0
    elif "sc2" in fixtures:
        group = 1
    elif "sc3" in fixtures:
        group = 2
    else:
        group = 3
    return group, item.get_closest_marker("stops_spark") is not None


@pytest.fixture(scope="session")
def spark_holder(tmp_path_factory):
    holder = SparkHolder(str(tmp_path_factory.mktemp("executor-tmp")))
    yield holder
    holder.stop()


@pytest.fixture(scope="session", autouse=True)
def _start_connect_ci_run(request, tmp_path_factory, _start_s3_server, _start_azurite, _start_gcs_server):
    """Start CI's Spark Connect scenarios (``support/connect_runs.py``) with the session, when a
    selected test reads them: they run beside the tests that come first. None otherwise. (After
    ``_start_s3_server``, ``_start_azurite`` and ``_start_gcs_server``: their Sparks inherit their
    environment too.)"""
    import importlib.util

    wanted = any("connect_ci_run" in getattr(item, "fixturenames", ()) for item in request.session.items)
    if not wanted or importlib.util.find_spec("grpc_status") is None:  # test_connect.py skips without it
        yield None
        return
    from connect_runs import CI_SCENARIOS, ConnectRun

    run = ConnectRun(tmp_path_factory.mktemp("connect"), CI_SCENARIOS)
    yield run
    run.stop()


@pytest.fixture(scope="session")
def connect_ci_run(_start_connect_ci_run):
    """The session's run of CI's Connect scenarios (started with the session, read by test_connect.py)."""
    return _start_connect_ci_run


#: Each store fixture: the support module of its server (with ``installed()``) and that server's class.
STORE_SERVERS = {
    "s3_store": ("s3_server", "S3Server"),
    "azure_store": ("azurite_server", "AzuriteServer"),
    "gcs_store": ("gcs_server", "GcsServer"),
}


def _selected_tests_use(session, fixture: str) -> bool:
    """Whether a selected test uses ``fixture``: names it (itself or through its fixtures), or is
    parametrized with its name (``any_store`` and the fixtures like it reach a store by
    ``request.getfixturevalue``, which the fixture closure does not show)."""
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        if fixture in getattr(item, "fixturenames", ()) or any(
            value == fixture for value in params if isinstance(value, str)
        ):
            return True
    return False


def _serve_store(request, fixture: str):
    """The body of a store's autouse session fixture: start its server (``STORE_SERVERS``) with the
    session when a selected test uses ``fixture``, and put its ``env`` in ``os.environ`` at once: every
    Spark started later in the session (its executors inherit the environment) reaches it as a user's
    would, by the environment alone. None otherwise, or when the server is not installed (``fixture``
    then skips); the environment is restored and the server stopped at the end."""
    import importlib

    module_name, class_name = STORE_SERVERS[fixture]
    if not _selected_tests_use(request.session, fixture):
        yield None
        return
    module = importlib.import_module(module_name)
    if not module.installed():
        yield None
        return
    server = getattr(module, class_name)()
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in server.env.items():
                patch.setenv(name, value)
            yield server
    finally:
        server.stop()


def _started(server, missing: str, ci_runs: str | None = None):
    """``server``, or a skip saying what is ``missing`` when there is none (a failure on CI when CI
    runs the ``ci_runs`` tests)."""
    if server is None:
        if ci_runs is not None and os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; CI runs the {ci_runs} tests", pytrace=False)
        pytest.skip(missing)
    return server


@pytest.fixture(scope="session", autouse=True)
def _start_s3_server(request):
    """Start an S3-protocol server (``support/s3_server.py``: moto, from the ``dev`` extra) with the
    session when a selected test uses ``s3_store`` (``_serve_store``)."""
    yield from _serve_store(request, "s3_store")


@pytest.fixture(scope="session")
def s3_store(_start_s3_server):
    """The session's S3 server (``support/s3_server.S3Server``: ``url(key)``, ``new_bucket()``,
    ``files_under(url)``, ``endpoint``, ``bucket``, ``access_key``, ``secret_key``, ``client``, ``env``);
    its ``env`` is in ``os.environ`` for the whole session."""
    return _started(_start_s3_server, "no S3 server: moto[server] is not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="session", autouse=True)
def _start_azurite(request):
    """Start an Azure Blob Storage emulator (``support/azurite_server.py``: Azurite, which
    ``scripts/test.sh`` installs into ``$VENV/azurite``) with the session when a selected test uses
    ``azure_store`` (``_serve_store``)."""
    yield from _serve_store(request, "azure_store")


@pytest.fixture(scope="session")
def azure_store(_start_azurite):
    """The session's Azure Blob Storage emulator (``support/azurite_server.AzuriteServer``: ``url(path)``,
    ``new_container()``, ``files_under(url)``, ``endpoint``, ``container``, ``account``, ``account_key``,
    ``client``, ``env``); its ``env`` is in ``os.environ`` for the whole session."""
    import azurite_server

    missing = (
        f"no Azure emulator: Azurite is not installed at {azurite_server.executable()} (with node on PATH): "
        "scripts/test.sh installs it with npm"
    )
    return _started(_start_azurite, missing, ci_runs="Azure")


@pytest.fixture(scope="session", autouse=True)
def _start_gcs_server(request):
    """Start a GCS emulator (``support/gcs_server.py``: gcp-storage-emulator, from the ``dev`` extra)
    with the session when a selected test uses ``gcs_store`` (``_serve_store``)."""
    yield from _serve_store(request, "gcs_store")


@pytest.fixture(scope="session")
def gcs_store(_start_gcs_server):
    """The session's GCS emulator (``support/gcs_server.GcsServer``: ``url(key)``, ``new_bucket()``,
    ``files_under(url)``, ``endpoint``, ``bucket``, ``client``, ``env``); its ``env`` is in
    ``os.environ`` for the whole session."""
    missing = "no GCS emulator: gcp-storage-emulator is not installed (pip install -e '.[dev]')"
    return _started(_start_gcs_server, missing, ci_runs="GCS")


@pytest.fixture(params=list(STORE_SERVERS), ids=lambda fixture: fixture.removesuffix("_store"))
def any_store(request):
    """Each store's server in turn: a test that uses it runs once per store (``s3_store``, ``azure_store``,
    ``gcs_store``), and skips where that store's fixture does. A test narrows it to some stores with
    ``pytest.mark.parametrize("any_store", [...fixture names], indirect=True)``."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def sc2(spark_holder):
    """A SparkContext on local-cluster[2,1,1024]: two executors, one slot each."""
    return spark_holder.get(2)


@pytest.fixture
def sc3(spark_holder):
    """A SparkContext on local-cluster[3,1,1024], for ps + chief + worker layouts."""
    return spark_holder.get(3)


def read_json_files(directory: Path, pattern: str = "*.json") -> dict[str, dict]:
    """Load every JSON file a map_fun wrote, keyed by file stem."""
    import json

    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob(pattern))}


#: The session's own Keras choice (normally none: Keras 3), restored after every test.
SESSION_KERAS_CHOICE = os.environ.get("TF_USE_LEGACY_KERAS")


@pytest.fixture(autouse=True)
def _keras_choice_stays_with_its_test():
    """Whatever sets ``TF_USE_LEGACY_KERAS`` in this process (a test or a module fixture building a
    tf-keras model here), the session's choice is back after each test: clusters carry the driver's
    choice to their nodes, so a leftover setting would turn every later test's nodes to tf-keras."""
    yield
    if SESSION_KERAS_CHOICE is None:
        os.environ.pop("TF_USE_LEGACY_KERAS", None)
    else:
        os.environ["TF_USE_LEGACY_KERAS"] = SESSION_KERAS_CHOICE
