"""sparkdl.driver.feeding: ``cluster.train`` and ``cluster.inference`` check their arguments first."""

from __future__ import annotations

import pytest

from sparkdl.driver.feeding import ClusterFeeder
from sparkdl.transport.protocol import TrainingPlan


@pytest.mark.parametrize(
    "plan, problem",
    [
        (TrainingPlan(seed=-1), "seed"),
        (TrainingPlan(qname="../../tmp/x"), "qname"),
        (TrainingPlan(feed_timeout=0), "feed_timeout"),
        (TrainingPlan(epochs=0), "num_epochs"),
        (TrainingPlan(cache_max_bytes=0), "cache_max_bytes"),
        (TrainingPlan(cache=False, deterministic=True), "cluster.train\\(deterministic=True\\)"),
    ],
)
def test_cluster_train_checks_its_arguments_before_anything_else(plan, problem):
    feeder = ClusterFeeder(spark=None, secret=b"", coordinator=None, waits=None, cluster_id="c")  # never reached
    with pytest.raises(ValueError, match=f"^{problem}"):
        feeder.train(plan, data=None)


def test_cluster_inference_checks_qname_before_anything_else():
    feeder = ClusterFeeder(spark=None, secret=b"", coordinator=None, waits=None, cluster_id="c")
    with pytest.raises(ValueError, match="^qname must be"):
        feeder.inference(None, 600, "a/b")
