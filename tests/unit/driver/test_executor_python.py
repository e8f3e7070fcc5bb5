"""The executors' Python check (``driver/executor_python.py``) without Spark: which masters get the
driver's interpreter, what the messages say, the probe pickled by value, and the check's steps
against a fake SparkContext. The real thing: tests/cluster/deployment/test_executor_python_cluster.py."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading

import pytest

from sparkdl.common.errors import PreflightError
from sparkdl.driver import executor_python as ep

pytestmark = pytest.mark.timeout(60)

NO_CONF = {}.get


def facts(executable="/venv/bin/python", sparkdl="0.1.0", error=None, **packages) -> ep.PythonFacts:
    return ep.PythonFacts(executable, "3.11.7", sparkdl, error, packages)


@pytest.mark.parametrize(
    "master", ["local", "local[1]", "local[4]", "local[*]", "local[2,3]", "local-cluster[2,1,1024]"]
)
def test_a_local_master_with_nothing_set_runs_the_drivers_python(master):
    assert ep.runs_driver_python(master, "python3", {}, NO_CONF)


@pytest.mark.parametrize("master", ["spark://host:7077", "yarn", "k8s://https://api:6443", "localhost", "local-x"])
def test_other_masters_keep_what_spark_runs(master):
    assert not ep.runs_driver_python(master, "python3", {}, NO_CONF)


@pytest.mark.parametrize(
    ("env", "conf", "python_exec"),
    [
        ({"PYSPARK_PYTHON": "/opt/py/bin/python"}, {}, "/opt/py/bin/python"),
        ({"PYSPARK_PYTHON": "python3"}, {}, "python3"),  # chosen, even if it is PySpark's default
        ({}, {"spark.pyspark.python": "/opt/py/bin/python"}, "python3"),
        ({}, {"spark.executorEnv.PYSPARK_PYTHON": "/opt/py/bin/python"}, "python3"),
        ({}, {}, "/set/by/the/user/python"),  # sc.pythonExec assigned in code
    ],
)
def test_a_python_the_user_chose_is_left_alone(env, conf, python_exec):
    assert not ep.runs_driver_python("local-cluster[2,1,1024]", python_exec, env, conf.get)


def test_the_setting_is_named_as_the_user_would_change_it():
    assert ep.python_setting("python3", {}, NO_CONF) == (
        "PySpark's default 'python3' from the executors' PATH, as PYSPARK_PYTHON is unset"
    )
    env = {"PYSPARK_PYTHON": "/opt/py/bin/python"}
    assert ep.python_setting("/opt/py/bin/python", env, NO_CONF) == "PYSPARK_PYTHON=/opt/py/bin/python"
    assert ep.python_setting("/opt/py/bin/python", env, NO_CONF, "/opt/py/bin/python") == "set by PYSPARK_PYTHON"
    conf = {"spark.pyspark.python": "/opt/py/bin/python"}.get
    assert ep.python_setting("python3", {}, conf).startswith(
        "sc.pythonExec='python3': spark.pyspark.python=/opt/py/bin/python is set, but PySpark takes PYSPARK_PYTHON"
    )


def test_the_missing_sparkdl_message_names_both_interpreters_the_setting_and_the_fix():
    executor = facts("/usr/bin/python3", None, "ModuleNotFoundError: No module named 'sparkdl'")
    text = ep.missing_sparkdl_message(executor, facts(), "PySpark's default 'python3' from the executors' PATH")
    lines = text.splitlines()
    assert lines[0] == "the executors' Python cannot import sparkdl (ModuleNotFoundError: No module named 'sparkdl')."
    assert (
        lines[1]
        == "  executors run: /usr/bin/python3 (Python 3.11.7), PySpark's default 'python3' from the executors' PATH"
    )
    assert lines[2] == "  this driver runs: /venv/bin/python (Python 3.11.7)"
    fix = " ".join(lines[3:])
    for remedy in (
        "PYSPARK_PYTHON",
        "--conf spark.pyspark.python=",
        "activated",
        "install sparkdl-tf on the executors",
    ):
        assert remedy in fix
    assert len(lines) <= 6 and max(map(len, lines)) <= 120


def test_a_version_the_executors_do_not_share_is_named_with_both_versions():
    driver = facts(tensorflow="2.21.0", keras="3.15.1", **{"tf-keras": None})
    executor = facts("/exec/python", tensorflow="2.20.0", keras="3.15.1", **{"tf-keras": "2.20.0"})
    assert ep.version_mismatches(executor, driver) == [
        "tensorflow 2.20.0 on the executors (/exec/python), 2.21.0 on the driver"
    ]
    missing = facts("/exec/python", sparkdl="0.0.9", keras="3.15.1")
    assert ep.version_mismatches(missing, driver) == [
        "sparkdl 0.0.9 on the executors (/exec/python), 0.1.0 on the driver",
        "tensorflow (not installed) on the executors (/exec/python), 2.21.0 on the driver",
    ]
    bare_driver = facts(tensorflow=None, keras=None)  # the driver needs only the base package
    assert ep.version_mismatches(executor, bare_driver) == []


def test_the_probe_is_pickled_by_value_and_runs_where_sparkdl_cannot_be_imported():
    from pyspark import cloudpickle

    program = (
        "import json, pickle, sys\n"
        "sys.modules['sparkdl'] = None  # import sparkdl fails here, as on an executor without it\n"
        "probe = pickle.loads(sys.stdin.buffer.read())\n"
        "print(json.dumps(next(iter(probe([0])))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        input=cloudpickle.dumps(ep.probe_function()),
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    found = ep.PythonFacts.from_probe(json.loads(done.stdout))
    assert found.executable == sys.executable and found.sparkdl is None
    assert found.sparkdl_error.startswith("ModuleNotFoundError: import of sparkdl halted")
    assert set(found.packages) == {"tensorflow", "keras", "tf-keras"}


class FakeRDD:
    def __init__(self, context):
        self.context = context
        self.fn = None

    def mapPartitions(self, fn):  # noqa: N802 - PySpark's name
        self.fn = fn
        return self

    def collect(self):
        self.context.jobs.append(self.context.pythonExec)
        self.context.release.wait(10)
        return [self.context.answer or next(iter(self.fn([0])))]


class FakeContext:
    def __init__(self, answer=None, hold=False):
        self.pythonExec = "python3"
        self.answer = answer
        self.jobs = []
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def parallelize(self, data, slices):
        assert (list(data), slices) == ([0], 1)
        return FakeRDD(self)


class FakeSpark:
    connect = False

    def __init__(self, sc, master="local-cluster[1,1,1024]", conf=None):
        self.sc, self.master, self._conf = sc, master, conf or {}
        self.tags, self.cancelled = [], []

    def conf(self, key):
        return self._conf.get(key)

    def thread(self, target, name):
        return threading.Thread(target=target, name=name, daemon=True)

    def set_job_tag(self, tag, description):
        self.tags.append(tag)

    def cancel(self, tag):
        self.cancelled.append(tag)
        self.sc.release.set()

    def remember(self, key, value):
        self._conf[key] = value


def test_a_local_master_is_given_the_drivers_python_before_the_probe(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    spark = FakeSpark(FakeContext())
    ep.check_executor_python(spark)
    assert spark.sc.pythonExec == sys.executable and spark.sc.jobs == [sys.executable]
    assert spark.tags and not spark.cancelled


def test_a_cluster_master_keeps_its_python_and_an_executor_without_sparkdl_raises(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    answer = {"executable": "/usr/bin/python3", "version": "3.11.2", "sparkdl_error": "ModuleNotFoundError: x"}
    spark = FakeSpark(FakeContext(answer), master="spark://host:7077")
    with pytest.raises(PreflightError, match=r"(?s)cannot import sparkdl .*executors run: /usr/bin/python3 "):
        ep.check_executor_python(spark)
    assert spark.sc.pythonExec == "python3"


def test_other_versions_on_the_executors_are_a_warning(monkeypatch, caplog):
    import sparkdl

    monkeypatch.setenv("PYSPARK_PYTHON", "/exec/python")
    answer = {"executable": "/exec/python", "version": "3.11.2", "sparkdl": "0.0.1", "packages": {}}
    spark = FakeSpark(FakeContext(answer))
    with caplog.at_level(logging.WARNING, logger=ep.__name__):
        ep.check_executor_python(spark)  # no error: sparkdl imports there
    assert f"sparkdl 0.0.1 on the executors (/exec/python), {sparkdl.__version__} on the driver" in caplog.text
    assert spark.sc.pythonExec == "python3"  # PYSPARK_PYTHON chose it (the fake's pythonExec stays as it was)


def test_a_probe_that_outlives_its_time_is_cancelled_and_the_launch_goes_on(monkeypatch, caplog):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    spark = FakeSpark(FakeContext(hold=True))
    with caplog.at_level(logging.WARNING, logger=ep.__name__):
        ep.check_executor_python(spark, timeout=0.2)
    assert spark.cancelled == spark.tags and len(spark.tags) == 1
    assert "launching unchecked" in caplog.text


def test_spark_connect_is_not_probed():
    spark = FakeSpark(FakeContext(hold=True))
    spark.connect = True
    ep.check_executor_python(spark, timeout=0.2)
    assert spark.sc.jobs == [] and spark.sc.pythonExec == "python3"


def test_an_application_probes_an_interpreter_once_not_once_per_cluster(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    spark = FakeSpark(FakeContext())
    ep.check_executor_python(spark)
    ep.check_executor_python(spark)  # the next cluster of the same application
    assert spark.sc.jobs == [sys.executable]
    spark.sc.pythonExec = "/other/python"  # another interpreter is checked again
    monkeypatch.setenv("PYSPARK_PYTHON", "/other/python")
    ep.check_executor_python(spark)
    assert spark.sc.jobs == [sys.executable, "/other/python"]
