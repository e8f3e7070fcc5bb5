"""Keras 3 (``import keras``) trains multi-worker on sparkdl's nodes (local-cluster[2,1,1024]), the nodes'
default Keras: ``model.fit``, ``evaluate`` and ``predict`` under MultiWorkerMirroredStrategy, through
``node/keras3_multi_worker.py``. (Its unverified-version refusal: tests/unit/node/test_keras_policy.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from sparkdl import TFCluster

import keras3_functions as k3

pytestmark = pytest.mark.timeout(360)


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


def test_a_keras3_model_fed_from_a_dataframe_trains_to_identical_weights_on_both_nodes(spark, sc2, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1200, k3.WIDTH)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("float64")
    frame = spark.createDataFrame(
        [(row.tolist(), float(label)) for row, label in zip(x, y)], "x array<float>, y double"
    )
    train, validation = frame.randomSplit([0.8, 0.2], seed=1)
    cluster = TFCluster.run(
        sc2, k3.fit_from_dataframe, {"batch": 32}, 2, input_mode=TFCluster.InputMode.SPARK, return_results="all"
    )
    history = cluster.train(train.cache(), num_epochs=3, validation_data=validation.cache())
    cluster.shutdown(timeout=200)
    results = cluster.results
    assert [r["keras"].split(".")[0] for r in results] == ["3", "3"], "the nodes trained with Keras 3"
    assert results[0]["hash"] == results[1]["hash"], "both workers end with the same weights"
    assert results[0]["history"] == results[1]["history"], "History holds the global values on every worker"
    assert len(history["loss"]) == len(history["val_loss"]) == 3, history
    assert history["loss"][2] < history["loss"][0]
    np.testing.assert_allclose(history["loss"], results[0]["history"]["loss"], rtol=1e-6)


def test_two_workers_train_what_one_process_trains_on_the_whole_global_batches(sc2, tmp_path):
    """Each worker is fed half of every global batch; beside it, in the same process, one model is
    trained outside the strategy on the whole batches from the same initial weights (SGD, 20 steps)."""
    import keras

    cluster = TFCluster.run(sc2, k3.equivalence_suite, {"out": str(tmp_path)}, 2, return_results="all")
    cluster.shutdown(timeout=240)
    chief, worker = cluster.results
    for node in (chief, worker):
        assert node["weighted"]["difference"] <= 1e-5, node["weighted"]
        for name, values in node["weighted"]["history"].items():
            np.testing.assert_allclose(values, node["weighted"]["expected"][name], atol=1e-5, err_msg=name)
        for name, value in node["evaluate"]["got"].items():
            assert abs(value - node["evaluate"]["expected"][name]) <= 1e-5, node["evaluate"]
        assert 0 <= node["predict"] <= 1e-5, "predict returns every worker's rows, in the global order"
        assert node["class_weighted"] <= 1e-5 and node["multi_io"] <= 1e-5, node
        assert node["early_stopped"] == 2, "EarlyStopping stops every worker after epoch 2"
    assert chief["hash"] == worker["hash"] and chief["weighted"]["history"] == worker["weighted"]["history"]
    saved = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert k3.weights_hash(saved) == chief["saved_hash"] == worker["saved_hash"]
    assert (tmp_path / "exported" / "saved_model.pb").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported", "model.keras"], "only the chief's copies"


@pytest.mark.cluster  # imports TensorFlow and Keras
def test_keras3_under_parameter_servers_is_refused_at_once_saying_what_to_use():
    """Keras 3's trainer cannot drive ParameterServerStrategy; the layer says so before Keras fails deep inside.
    (install() changes nothing else in this process: every other change applies under multi-worker MWMS only.)"""
    import types

    import tensorflow as tf
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    from sparkdl.node import keras3_multi_worker

    keras3_multi_worker.install()
    keras3_multi_worker.install()  # idempotent: one wrapper, not two
    assert TensorFlowTrainer.fit._sparkdl_multi_worker  # ours, wrapping Keras' own fit, not another of ours
    assert not getattr(TensorFlowTrainer.fit.__wrapped__, "_sparkdl_multi_worker", False)
    strategy = object.__new__(tf.distribute.experimental.ParameterServerStrategy)  # no cluster needed to be one
    model = types.SimpleNamespace(distribute_strategy=strategy)
    for method in (TensorFlowTrainer.fit, TensorFlowTrainer.evaluate, TensorFlowTrainer.predict):
        with pytest.raises(keras3_multi_worker.ParameterServerUnsupported, match="TF_USE_LEGACY_KERAS"):
            method(model, None)


@pytest.mark.cluster  # imports TensorFlow and Keras
def test_step_outputs_of_several_local_replicas_are_averaged_element_wise(monkeypatch):
    """A worker with several replicas (GPUs) hands Keras PerReplica values; scalars and vectors alike
    become the element-wise mean, as one process's Keras computes (2 logical CPUs stand in for GPUs)."""
    import tensorflow as tf

    from sparkdl.node import keras3_multi_worker

    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:
        pass  # devices were initialised earlier in this process: use what exists
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(devices) < 2:
        pytest.skip("this process initialised its devices before the test could split the CPU")
    strategy = tf.distribute.MirroredStrategy(devices[:2])
    monkeypatch.setattr(keras3_multi_worker, "_multi_worker", lambda s: s is strategy)
    reduce = keras3_multi_worker._mean_across_replicas(lambda *a: pytest.fail("Keras' own reduction ran"))

    def step():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        value = tf.cast(replica, tf.float32)
        return {"loss": value, "f1": tf.stack([value, 2 * value, 3 * value])}

    outputs = strategy.run(step)
    reduced = reduce(outputs, strategy, "auto")
    assert float(reduced["loss"]) == 0.5
    np.testing.assert_allclose(reduced["f1"].numpy(), [0.5, 1.0, 1.5])
    sparse = tf.SparseTensorSpec([None, 4], tf.float32)
    spec = keras3_multi_worker._spec_batch((sparse, tf.OptionalSpec(None)))
    assert spec == (sparse, None), "a sparse input keeps its spec; an absent part is None to Keras"
