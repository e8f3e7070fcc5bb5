"""What the concurrent-fit tests read from Spark's status store: which executors each sparkdl
cluster's nodes ran on and when, and the 4-executor application they run in (shared by
test_keras_parallel_tuning.py and test_keras_optuna_parallel.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def spark4(spark_holder):
    """local-cluster[4,1,768]: four executors, one slot each."""
    spark_holder.get(4, {"spark.executor.memory": "768m"}, memory_mb=768)
    return spark_holder.spark


def digits(spark, rows: int = 600):
    """sklearn's digits as a cached DataFrame (``features`` array<float>, ``label`` long) of 2 partitions."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    data = [((r / 16).astype("float32").tolist(), int(t)) for r, t in zip(x[:rows], y[:rows])]
    return spark.createDataFrame(data, "features array<float>, label long").repartition(2).cache()


def _option(value):
    return value.get() if value.isDefined() else None


def clusters(sc, since_job: int) -> dict[str, dict]:
    """Each sparkdl cluster whose jobs ran after job ``since_job``: the executors its nodes' launch
    tasks ran on (its last launch job: an earlier one may have been run again, starting no node),
    when that launch job was submitted and when its last feeding job completed (ms)."""
    store = sc._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    clusters: dict[str, dict] = {}
    for job in sorted((jobs.apply(i) for i in range(jobs.size())), key=lambda j: j.jobId()):
        group = _option(job.jobGroup())
        if job.jobId() <= since_job or not group or not group.startswith("sparkdl-"):
            continue
        name, feeding = group.removesuffix("-feed"), group.endswith("-feed")
        cluster = clusters.setdefault(name, {"executors": set(), "launched": None, "fed": 0})
        if feeding:
            completed = _option(job.completionTime())
            cluster["fed"] = max(cluster["fed"], completed.getTime() if completed else 0)
        elif _option(job.description()) and _option(job.description()).startswith("sparkdl: run "):
            stage = job.stageIds().apply(0)
            attempt = sc.statusTracker().getStageInfo(stage).currentAttemptId
            tasks = store.taskList(stage, attempt, 100)
            cluster["executors"] = {tasks.apply(i).executorId() for i in range(tasks.size())}
            cluster["launched"] = _option(job.submissionTime()).getTime()
    return {name: c for name, c in clusters.items() if c["launched"] is not None}


def last_job(sc) -> int:
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    return max((jobs.apply(i).jobId() for i in range(jobs.size())), default=-1)


def overlap(a: dict, b: dict) -> bool:
    return a["launched"] < b["fed"] and b["launched"] < a["fed"]
