"""The driver's one door to Spark: a classic ``SparkContext`` or a Spark Connect session.

``TFCluster.run`` accepts a ``SparkContext``, a classic ``SparkSession`` or a Spark Connect
``SparkSession``. Everything the driver side asks of Spark goes through a :class:`SparkAccess`
made by :func:`spark_access`, so the rest of ``sparkdl/driver/`` has no second code path:

==============================  ==========================================  =====================================
what                            classic (``SparkContext``)                  Spark Connect (no ``SparkContext``)
==============================  ==========================================  =====================================
configuration, master           ``sc.getConf()``, ``sc.master``             ``spark.conf`` (server side)
registered executors            the JVM's executor list                     unknown (Spark's barrier check waits)
node launch job                 barrier RDD ``mapPartitions``               barrier ``mapInArrow`` on ``range``
naming / cancelling jobs        job groups                                  operation tags (``addTag``)
coordinator address             ``spark.driver.host``                       this process's address toward the
                                                                            Connect server (the coordinator runs
                                                                            in the client)
feeding-job progress            Spark's status tracker                      the nodes' own events only
RDD input                       fed as is                                   rejected: Connect has no RDDs
==============================  ==========================================  =====================================

``SPARKDL_DRIVER_HOST`` overrides the address the nodes are told to reach the coordinator at
(a client behind NAT, or with several interfaces), and ``SPARKDL_DRIVER_BIND_ADDRESS`` the address
it listens on (by default the advertised one, or ``spark.driver.bindAddress`` with a
SparkContext): a client behind NAT advertises its public address and binds ``0.0.0.0`` or its
local one, which the public one is not.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import Any, Callable, Iterator

from ..common.errors import PreflightError
from ..common.timeouts import PLACEMENT_STATUS_WAIT_S
from ..storage import StoreSettings, spark_conf

logger = logging.getLogger(__name__)

#: The environment variable that overrides the coordinator's advertised address.
DRIVER_HOST_ENV = "SPARKDL_DRIVER_HOST"
#: The environment variable that overrides the address the coordinator binds (listens on).
DRIVER_BIND_ENV = "SPARKDL_DRIVER_BIND_ADDRESS"


class SparkAccess:
    """What the driver side needs from Spark (see the module docstring); one per ``TFCluster``."""

    #: True for a Spark Connect session (no SparkContext, no RDDs in this process).
    connect = False

    @property
    def master(self) -> str:
        """Spark's master URL."""
        raise NotImplementedError

    @property
    def sc(self):
        """The SparkContext (None under Spark Connect)."""
        return None

    def conf(self, key: str) -> str | None:
        """A Spark configuration value, None when unset."""
        raise NotImplementedError

    def remember(self, key: str, value: str) -> None:
        """Keep ``value`` under ``key`` for this Spark application's later clusters (read back with
        :meth:`conf`): what sparkdl learned once per application, such as the executors' checked
        Python. No-op where this side cannot write the application's configuration."""

    def count_executors(self) -> int | None:
        """Registered executors, the driver excluded; None when this side cannot tell."""
        return None

    def executor_cores(self, at_least: int) -> list[int]:
        """Cores of each registered executor ([] when unknown)."""
        return []

    def active_executors(self) -> list[str] | None:
        """The ids of the executors that can take tasks now (registered, not being removed); None
        when this side cannot tell. An elastic cluster sizes its next attempt by them."""
        return None

    def default_fs(self) -> str:
        """Hadoop's default file system (``fs.defaultFS``), for relative paths on the nodes."""
        return self.conf("spark.hadoop.fs.defaultFS") or "file://"

    def coordinator_addresses(self) -> tuple[str, str]:
        """(bind, advertise): where the coordinator listens and the address nodes are told to use."""
        raise NotImplementedError

    def store_settings(self) -> StoreSettings:
        """The application's store settings (``fs.s3a.*``, ``fs.azure.*``, ``fs.gs.*``), for every node."""
        return spark_conf.from_spark(self.sc if self.sc is not None else self._session())

    def thread(self, target: Callable[[], None], name: str) -> threading.Thread:
        """A daemon thread (not started) that may run Spark jobs and inherits this thread's job properties."""
        from pyspark import InheritableThread

        return InheritableThread(target=target, name=name, daemon=True, session=self._session())

    def _session(self):
        """The session PySpark's InheritableThread needs (Spark Connect only)."""
        return None

    def set_job_tag(self, tag: str, description: str) -> None:
        """Name the Spark jobs this thread starts from now on (cancelled together by :meth:`cancel`)."""
        raise NotImplementedError

    def cancel(self, tag: str) -> None:
        """Cancel the running Spark jobs named ``tag`` (best effort)."""
        raise NotImplementedError

    def launch(
        self,
        count: int,
        launcher: Callable[[Any], Iterator[dict]],
        profile: Any,
        barrier: bool,
        executors: list[str] | None = None,
    ) -> list[dict]:
        """Run ``launcher`` once per task over ``count`` tasks (partition i launches node i); its records.
        ``executors`` (ids, one per task): where Spark should prefer to run each task."""
        raise NotImplementedError

    def executor_ids(self) -> list[str] | None:
        """The ids of the executors registered now (the driver excluded); None when this side cannot tell."""
        return None

    def task_executors(self, tag: str, count: int) -> dict[int, str] | None:
        """The executor id each of the ``count`` tasks of the latest job named ``tag`` ran on, by
        partition (``tag``'s job must have started them all); None when this side cannot tell."""
        return None

    def check_profile(self, profile: Any) -> None:
        """Have Spark accept a ResourceProfile now (raising Spark's refusal), before any node starts."""

    def feeding_job_progress(self, tag: str) -> tuple[int, int] | None:
        """(completed, total) tasks of the latest job named ``tag``; None when this side cannot tell."""
        return None

    def require_frames(self, data: Any, what: str) -> None:
        """Raise TypeError when ``data`` is an RDD this side cannot run."""


class ClassicSpark(SparkAccess):
    """A classic SparkContext in this process (py4j to the driver JVM)."""

    def __init__(self, sc):
        self._sc = sc

    @property
    def sc(self):
        return self._sc

    @property
    def master(self) -> str:
        return self._sc.master

    def conf(self, key: str) -> str | None:
        return self._sc.getConf().get(key)

    def remember(self, key: str, value: str) -> None:
        # The running application's own SparkConf (getConf() returns copies of it): a later
        # cluster in this application reads the value with conf(); nothing else does.
        self._sc._conf.set(key, value)

    def count_executors(self) -> int | None:
        count = self._sc._jsc.sc().getExecutorMemoryStatus().size()
        master = self.master
        return count if master.startswith("local") and not master.startswith("local-cluster") else count - 1

    def active_executors(self) -> list[str] | None:
        jsc = self._sc._jsc.sc()
        if self.master.startswith("local") and not self.master.startswith("local-cluster"):
            return ["driver"]  # local[N]: the driver is the one executor
        backend = jsc.schedulerBackend()
        ids = jsc.getExecutorIds()  # the scheduler's executors, those being removed included
        return [ids.apply(i) for i in range(ids.size()) if backend.isExecutorActive(ids.apply(i))]

    def executor_cores(self, at_least: int, wait_s: float = 10.0) -> list[int]:
        # Spark's status store learns of executors from the listener bus, a moment after the
        # scheduler does: wait (bounded) until it lists ``at_least`` of them.
        deadline = time.monotonic() + wait_s
        while True:
            try:
                executors = self._sc._jsc.sc().statusStore().executorList(True)
                infos = [executors.apply(i) for i in range(executors.size())]
                cores = [int(info.totalCores()) for info in infos if info.id() != "driver" and info.totalCores() > 0]
            except Exception:  # noqa: BLE001 - a Spark-internal API: without it, spark.executor.cores is asked for
                logger.debug("sparkdl: cannot read the executors' cores from Spark's status store", exc_info=True)
                return []
            if len(cores) >= at_least or time.monotonic() >= deadline:
                return cores
            time.sleep(0.1)  # no event reaches Python when the listener bus catches up

    def default_fs(self) -> str:
        return self._sc._jsc.hadoopConfiguration().get("fs.defaultFS") or "file://"

    def coordinator_addresses(self) -> tuple[str, str]:
        # Nodes connect to spark.driver.host (resolved), as Spark's own executors do. The
        # coordinator binds that same address, unless spark.driver.bindAddress says otherwise
        # (e.g. 0.0.0.0 in a Kubernetes driver pod, where the advertised name is a service).
        host = os.environ.get(DRIVER_HOST_ENV) or self.conf("spark.driver.host") or socket.gethostname()
        advertise = _resolve(host)
        return _bind_address(advertise, self.conf("spark.driver.bindAddress")), advertise

    def set_job_tag(self, tag: str, description: str) -> None:
        self._sc.setJobGroup(tag, description, interruptOnCancel=True)

    def cancel(self, tag: str) -> None:
        self._sc.cancelJobGroup(tag)

    def launch(self, count, launcher, profile, barrier, executors=None) -> list[dict]:
        rdd = self._sc.parallelize(range(count), count) if not executors else self._placed_range(executors)
        if profile is not None:
            rdd = rdd.withResources(profile)
        return (rdd.barrier().mapPartitions(launcher) if barrier else rdd.mapPartitions(launcher)).collect()

    def _placed_range(self, executors: list[str]):
        """``parallelize(range(len(executors)))`` with partition i preferring executor ``executors[i]``.

        PySpark cannot give partitions preferred locations; the JVM's ``SparkContext.makeRDD`` can:
        one pickled element per partition, each with Spark's executor location
        (``executor_<host>_<id>``, ``ExecutorCacheTaskLocation``). A preference only: the scheduler
        waits ``spark.locality.wait`` for that executor, then takes another (``task_executors`` tells).
        """
        from pyspark.rdd import RDD
        from pyspark.serializers import CPickleSerializer

        jvm, serializer = self._sc._jvm, CPickleSerializer()
        hosts = self._executor_hosts()
        scala = jvm.scala.jdk.javaapi.CollectionConverters
        # an executor gone meanwhile gets no preference: its task runs elsewhere and starts no node
        places = [[f"executor_{hosts[e]}_{e}"] if e in hosts else [] for e in executors]
        pairs = [
            jvm.scala.Tuple2(bytearray(serializer.dumps(i)), scala.asScala(place).toSeq())
            for i, place in enumerate(places)
        ]
        tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
        jrdd = self._sc._jsc.sc().makeRDD(scala.asScala(pairs).toSeq(), tag)
        return RDD(jvm.org.apache.spark.api.java.JavaRDD(jrdd, tag), self._sc, serializer)

    def _executor_hosts(self) -> dict[str, str]:
        """Each registered executor's host, by id (from Spark's status store)."""
        executors = self._sc._jsc.sc().statusStore().executorList(True)
        infos = [executors.apply(i) for i in range(executors.size())]
        return {info.id(): info.hostPort().rsplit(":", 1)[0] for info in infos if info.id() != "driver"}

    def executor_ids(self) -> list[str] | None:
        return list(self._executor_hosts())

    def task_executors(self, tag: str, count: int, wait_s: float = PLACEMENT_STATUS_WAIT_S) -> dict[int, str] | None:
        # The status store hears of tasks from the listener bus, a moment after the scheduler
        # started them: wait (bounded) until it lists every task of the job's stage.
        tracker, store = self._sc.statusTracker(), self._sc._jsc.sc().statusStore()
        deadline = time.monotonic() + wait_s
        while True:
            placement = self._stage_tasks(tracker, store, tag)
            if len(placement) >= count or time.monotonic() >= deadline:
                return placement if len(placement) >= count else None
            time.sleep(0.1)  # no event reaches Python when the listener bus catches up

    @staticmethod
    def _stage_tasks(tracker, store, tag: str) -> dict[int, str]:
        """The running or successful tasks of the latest job named ``tag``: partition -> executor id."""
        job_ids = tracker.getJobIdsForGroup(tag)
        job = tracker.getJobInfo(max(job_ids)) if job_ids else None
        placement: dict[int, str] = {}
        for stage_id in job.stageIds if job else []:
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue
            tasks = store.taskList(stage_id, stage.currentAttemptId, 1 << 20)
            for task in (tasks.apply(i) for i in range(tasks.size())):
                if task.status() in ("RUNNING", "SUCCESS"):
                    placement[int(task.index())] = task.executorId()
        return placement

    def check_profile(self, profile: Any) -> None:
        # Spark checks a profile when an RDD first takes it: on one that never runs.
        self._sc.parallelize([0], 1).withResources(profile)

    def feeding_job_progress(self, tag: str) -> tuple[int, int] | None:
        tracker = self._sc.statusTracker()
        job_ids = tracker.getJobIdsForGroup(tag)
        if not job_ids:
            return 0, 0
        job = tracker.getJobInfo(max(job_ids))
        done = total = 0
        for stage_id in job.stageIds if job else []:
            stage = tracker.getStageInfo(stage_id)
            if stage:
                done, total = done + stage.numCompletedTasks, total + stage.numTasks
        return done, total


class ConnectSpark(SparkAccess):
    """A Spark Connect session: the driver JVM is elsewhere; this process is its client."""

    connect = True

    def __init__(self, spark):
        self._spark = spark

    @property
    def master(self) -> str:
        return self.conf("spark.master") or ""

    def _session(self):
        return self._spark

    def conf(self, key: str) -> str | None:
        return self._spark.conf.get(key, None)

    def coordinator_addresses(self) -> tuple[str, str]:
        # The coordinator runs here, in the client: advertise the address this machine uses to
        # reach the Connect server, which is the network the cluster is on.
        host = os.environ.get(DRIVER_HOST_ENV)
        advertise = _resolve(host) if host else _route_toward(_connect_server_host(self._spark))
        # The server's spark.driver.bindAddress is about its own JVM, not this client: not read.
        return _bind_address(advertise), advertise

    def set_job_tag(self, tag: str, description: str) -> None:
        del description  # Connect tags carry no description
        self._spark.addTag(tag)

    def cancel(self, tag: str) -> None:
        try:
            self._spark.interruptTag(tag)
        except Exception:  # noqa: BLE001 - cancelling is best effort (the session may be closing)
            logger.debug("sparkdl: could not interrupt the Spark Connect operations tagged %s", tag, exc_info=True)

    def launch(self, count, launcher, profile, barrier, executors=None) -> list[dict]:
        del executors  # Connect has no way to place tasks: never asked (no executor ids here)

        def launch_batches(batches):
            import pyarrow as pa

            records = [json.dumps(record, default=str) for record in launcher(batches)]
            yield pa.RecordBatch.from_pydict({"record": records}, schema=pa.schema([("record", pa.string())]))

        frame = self._spark.range(0, count, 1, numPartitions=count)
        rows = frame.mapInArrow(launch_batches, "record string", barrier=barrier, profile=profile).collect()
        return [json.loads(row["record"]) for row in rows]

    def require_frames(self, data: Any, what: str) -> None:
        from pyspark.sql import DataFrame

        if not isinstance(data, DataFrame):
            kind = f"{type(data).__module__}.{type(data).__qualname__}"
            raise TypeError(
                f"{what} got a {kind}: under Spark Connect there are no RDDs, pass a Spark "
                "DataFrame (e.g. spark.createDataFrame(rows, schema))"
            )


def spark_access(spark_or_sc: Any) -> SparkAccess:
    """The :class:`SparkAccess` for a ``SparkContext``, a classic ``SparkSession`` or a Connect session."""
    from pyspark import SparkContext

    if isinstance(spark_or_sc, SparkContext):
        return ClassicSpark(spark_or_sc)
    if is_connect(spark_or_sc):
        return ConnectSpark(spark_or_sc)
    from pyspark.sql import SparkSession

    if isinstance(spark_or_sc, SparkSession):
        return ClassicSpark(spark_or_sc.sparkContext)
    raise TypeError(
        f"TFCluster.run needs a SparkContext or a SparkSession (classic or Spark Connect), got "
        f"{type(spark_or_sc).__name__}"
    )


def is_connect(obj: Any) -> bool:
    """Whether ``obj`` (a session or a DataFrame) belongs to Spark Connect: told by its type, never
    by global state (a process with a local Connect server also holds a classic SparkContext)."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def _bind_address(advertise: str, spark_bind: str | None = None) -> str:
    """Where the coordinator listens: ``SPARKDL_DRIVER_BIND_ADDRESS``, else Spark's bind address
    (classic only), else the advertised address (one interface, never all of them by default)."""
    return os.environ.get(DRIVER_BIND_ENV) or spark_bind or advertise


def _resolve(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError:
        return "127.0.0.1"


def _connect_server_host(spark: Any) -> str:
    """The Connect server's host name, from the client's connection settings."""
    builder = getattr(getattr(spark, "client", None), "_builder", None)
    return getattr(builder, "host", None) or "localhost"


def _route_toward(host: str) -> str:
    """This machine's address on the route to ``host`` (no packet is sent: a UDP socket only routes)."""
    target = _resolve(host)
    if target.startswith("127."):
        return target
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((target, 9))
            return probe.getsockname()[0]
    except OSError as exc:
        raise PreflightError(
            f"cannot tell which address of this machine the Spark Connect server at {host} "
            f"reaches; set {DRIVER_HOST_ENV} to it"
        ) from exc
