"""The executors' Python: the one ``TFCluster.run`` needs, checked before any node starts.

PySpark starts each executor's Python workers as ``sc.pythonExec``. That is ``PYSPARK_PYTHON``
when the SparkContext starts, else ``python3`` from the executors' ``PATH``. spark-submit sets
``PYSPARK_PYTHON`` from ``spark.pyspark.python``; PySpark itself never reads that setting.
So a driver run from a virtual environment that is not activated (``.venv/bin/python app.py``,
a notebook kernel) gets executors running the system's ``python3``. Without this check, the
launch task then fails with ``No module named 'sparkdl'`` inside a long Java stack trace.

Two steps, both in :func:`check_executor_python`:

- a local master (``local``, ``local[N]``, ``local-cluster[...]``) runs its executors on this
  machine, so where no setting chose their Python they run this driver's (``sys.executable``);
- one small Spark task reports the executors' interpreter, whether it imports sparkdl, and the
  TensorFlow and Keras versions installed there. A Python without sparkdl raises
  ``PreflightError`` naming it and the setting; other versions than the driver's are a warning.

The task's function is pickled by value (it is defined inside :func:`probe_function`), so an
executor unpickles it without importing sparkdl. Spark Connect is skipped: its client has no
SparkContext, and its server chooses the executors' Python.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..common.errors import PreflightError
from ..common.timeouts import EXECUTOR_PYTHON_CHECK_S
from .preflight import local_master
from .spark_access import SparkAccess
from .spark_errors import task_failure

logger = logging.getLogger(__name__)

#: PySpark's ``sc.pythonExec`` when ``PYSPARK_PYTHON`` is unset.
PYSPARK_DEFAULT_PYTHON = "python3"
#: The environment variable PySpark reads when the SparkContext starts.
PYTHON_ENV = "PYSPARK_PYTHON"
#: The Spark settings that name the executors' Python (the first is spark-submit's).
PYTHON_CONFS = ("spark.pyspark.python", "spark.executorEnv.PYSPARK_PYTHON")
#: Where a SparkContext keeps the executor Python that passed the check: one probe per application
#: and interpreter, not one per cluster (a one-task job costs 0.1-1 s).
CHECKED_PYTHON_CONF = "spark.sparkdl.checkedExecutorPython"
#: What to do about an executor Python without sparkdl.
FIX = (
    "Fix: set PYSPARK_PYTHON to a Python with sparkdl-tf before the SparkContext starts\n"
    "  (spark-submit: --conf spark.pyspark.python=...), or start the driver from its activated\n"
    "  virtual environment, or install sparkdl-tf on the executors."
)


@dataclass(frozen=True)
class PythonFacts:
    """One Python's answer to the probe: its interpreter and what it can import."""

    executable: str
    version: str  # Python's, e.g. "3.11.7"
    sparkdl: str | None  # sparkdl's version, None when it cannot be imported
    sparkdl_error: str | None  # why ``import sparkdl`` failed (``ModuleNotFoundError: ...``)
    packages: Mapping[str, str | None]  # distribution versions ("tensorflow", "keras", "tf-keras")

    @classmethod
    def from_probe(cls, found: Mapping[str, Any]) -> "PythonFacts":
        """The facts from the probe's plain dict (built-in types only cross to the driver)."""
        return cls(
            executable=str(found["executable"]),
            version=str(found["version"]),
            sparkdl=found.get("sparkdl"),
            sparkdl_error=found.get("sparkdl_error"),
            packages=dict(found.get("packages") or {}),
        )


def probe_function() -> Callable[[Iterable[Any]], Iterator[dict]]:
    """The probe a Spark task runs (``mapPartitions``): it yields one dict of this Python's facts.

    Defined inside this function so that cloudpickle pickles it by value: an executor without
    sparkdl can still run it. It imports nothing of sparkdl's but ``sparkdl`` itself, and never
    TensorFlow (versions come from the installed distributions' metadata).
    """

    def probe(_rows):
        import importlib
        import importlib.metadata as metadata
        import sys

        def installed(*dists):
            for dist in dists:
                try:
                    return metadata.version(dist)
                except metadata.PackageNotFoundError:
                    continue
            return None

        found = {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3]}
        try:  # the package as a node imports it (by name: this is a probe, not a use of the face)
            package = importlib.import_module("sparkdl")
            found["sparkdl"] = str(getattr(package, "__version__", "unknown"))
        except Exception as exc:  # noqa: BLE001 - any failure to import is the answer
            found["sparkdl_error"] = f"{type(exc).__name__}: {exc}"
        found["packages"] = {
            "tensorflow": installed("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly"),
            "keras": installed("keras"),
            "tf-keras": installed("tf-keras"),
        }
        yield found

    return probe


def chosen_python(env: Mapping[str, str], conf: Callable[[str], str | None]) -> str | None:
    """The setting that chose the executors' Python (``NAME=value``), None when none did."""
    if env.get(PYTHON_ENV):
        return f"{PYTHON_ENV}={env[PYTHON_ENV]}"
    for key in PYTHON_CONFS:
        if conf(key):
            return f"{key}={conf(key)}"
    return None


def runs_driver_python(
    master: str, python_exec: str, env: Mapping[str, str], conf: Callable[[str], str | None]
) -> bool:
    """Whether the executors should run the driver's Python: a local master, and nothing chose theirs."""
    return local_master(master) and python_exec == PYSPARK_DEFAULT_PYTHON and chosen_python(env, conf) is None


def python_setting(
    python_exec: str, env: Mapping[str, str], conf: Callable[[str], str | None], executable: str | None = None
) -> str:
    """Where ``sc.pythonExec`` came from, in words, for the error message (``executable``: the
    interpreter the executors reported, not repeated when the setting names it)."""
    chosen = chosen_python(env, conf)
    if chosen is None and python_exec == PYSPARK_DEFAULT_PYTHON:
        return f"PySpark's default {python_exec!r} from the executors' PATH, as PYSPARK_PYTHON is unset"
    if chosen is None:
        return f"sc.pythonExec={python_exec!r}"
    if chosen.startswith(f"{PYTHON_ENV}="):
        return f"set by {PYTHON_ENV}" if python_exec == executable else chosen
    return (
        f"sc.pythonExec={python_exec!r}: {chosen} is set, but PySpark takes PYSPARK_PYTHON "
        "(spark-submit sets it from spark.pyspark.python)"
    )


def missing_sparkdl_message(executor: PythonFacts, driver: PythonFacts, setting: str) -> str:
    """The PreflightError's text for executors whose Python cannot import sparkdl."""
    return "\n".join(
        [
            f"the executors' Python cannot import sparkdl ({executor.sparkdl_error}).",
            f"  executors run: {executor.executable} (Python {executor.version}), {setting}",
            f"  this driver runs: {driver.executable} (Python {driver.version})",
            FIX,
        ]
    )


def failed_probe_message(cause: str, setting: str) -> str:
    """The PreflightError's text when the executors' Python could not run the probe task at all."""
    return "\n".join(
        [
            f"the executors' Python could not run a PySpark task: {cause}",
            f"  the executors' Python: {setting}",
            f"  this driver runs: {sys.executable}",
            FIX,
        ]
    )


def version_mismatches(executor: PythonFacts, driver: PythonFacts) -> list[str]:
    """One line per package whose version differs between the driver and the executors (the
    packages the driver has; sparkdl included)."""
    pairs = [("sparkdl", driver.sparkdl, executor.sparkdl)]
    pairs += [(name, version, executor.packages.get(name)) for name, version in driver.packages.items()]
    return [
        f"{name} {there or '(not installed)'} on the executors ({executor.executable}), {here} on the driver"
        for name, here, there in pairs
        if here is not None and there != here
    ]


def check_executor_python(spark: SparkAccess, timeout: float = EXECUTOR_PYTHON_CHECK_S) -> None:
    """Have the executors run a Python with sparkdl (see the module docstring); raise
    PreflightError naming their interpreter and the setting when they cannot import it."""
    sc = spark.sc
    if spark.connect or sc is None:
        return
    if runs_driver_python(spark.master, sc.pythonExec, os.environ, spark.conf):
        logger.info("sparkdl: executors of master %s run this driver's Python, %s", spark.master, sys.executable)
        sc.pythonExec = sys.executable  # read by each Spark job as it is built
    if spark.conf(CHECKED_PYTHON_CONF) == sc.pythonExec:
        return  # an earlier cluster of this application checked this interpreter
    probe = probe_function()
    outcome: dict[str, Any] = {}
    tag = f"sparkdl-python-check-{uuid.uuid4().hex[:12]}"

    def run_probe() -> None:
        spark.set_job_tag(tag, "sparkdl: check that the executors' Python imports sparkdl")
        try:
            outcome["found"] = sc.parallelize([0], 1).mapPartitions(probe).collect()
        except Exception as exc:  # noqa: BLE001 - read below, on the caller's thread
            outcome["error"] = exc

    thread = spark.thread(run_probe, "sparkdl-python-check")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        spark.cancel(tag)
        logger.warning(
            "sparkdl: the check of the executors' Python took over %g s (busy executors?); launching unchecked", timeout
        )
        return
    if "error" in outcome:
        logger.debug("sparkdl: the executors' Python check failed", exc_info=outcome["error"])
        setting = python_setting(sc.pythonExec, os.environ, spark.conf)
        raise PreflightError(failed_probe_message(task_failure(outcome["error"]).message, setting))
    executor = PythonFacts.from_probe(outcome["found"][0])
    driver = PythonFacts.from_probe(next(iter(probe([0]))))
    if executor.sparkdl is None:
        setting = python_setting(sc.pythonExec, os.environ, spark.conf, executor.executable)
        raise PreflightError(missing_sparkdl_message(executor, driver, setting))
    for line in version_mismatches(executor, driver):
        logger.warning("sparkdl: %s: the nodes may not run as the driver expects", line)
    spark.remember(CHECKED_PYTHON_CONF, sc.pythonExec)
