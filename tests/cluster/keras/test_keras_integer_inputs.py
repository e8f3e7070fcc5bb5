"""Integer inputs keep their integers (issue 53): KerasEstimator feeds each model input as the dtype the model
declares, so int64 ids above 2**24 (which float32 cannot tell apart) reach a two-input Functional model's
``IntegerLookup`` + ``Embedding`` exactly on the TF nodes, and ``transform`` scores the same model from the same
columns. (The layout's dtypes and refusals: tests/unit/keras/test_layout.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from sparkdl.keras import KerasEstimator

pytestmark = pytest.mark.timeout(420)

BASE = 2**24 + 1  # odd ids above 2**24: float32 rounds each to an even number, an id the vocabulary lacks
IDS = [BASE + 2 * k for k in range(6)] + [2**40 + 1, 2**53 - 1]


def id_model():
    """Inputs ``item`` (an int64 id) and ``x`` (2 floats): ``IntegerLookup`` over IDS (index 0: an id it lacks)
    into a zero-initialised ``Embedding``, concatenated with ``x``, to one sigmoid unit."""
    import keras

    keras.utils.set_random_seed(5)
    item = keras.Input((1,), dtype="int64", name="item")
    x = keras.Input((2,), name="x")
    index = keras.layers.IntegerLookup(vocabulary=IDS, name="lookup")(item)
    embedded = keras.layers.Flatten()(keras.layers.Embedding(len(IDS) + 1, 2, "zeros", name="embedding")(index))
    out = keras.layers.Dense(1, activation="sigmoid", name="y")(keras.layers.Concatenate()([embedded, x]))
    model = keras.Model({"item": item, "x": x}, out)
    model.compile(keras.optimizers.Adam(0.1), "binary_crossentropy")
    return model


def test_int64_ids_above_2_to_the_24_reach_an_embedding_exactly_in_fit_and_transform(sc2, spark_holder, tmp_path):
    spark = spark_holder.spark
    rows = [(IDS[i % len(IDS)], [0.5, float(i % 3)], float(i % len(IDS) % 2)) for i in range(64)]
    data = spark.createDataFrame(rows, "item long, x array<float>, label double").repartition(2)
    estimator = KerasEstimator(
        model=id_model(), feature_cols=["item", "x"], label_cols="label", epochs=1, batch_size=8, num_workers=2,
        model_dir=str(tmp_path), output_kind="regression",
    )  # fmt: skip
    model = estimator.fit(data)
    trained = model.keras_model
    rows_of_ids = trained.get_layer("embedding").get_weights()[0]
    # every id was looked up exactly: each one's row trained, the row of ids the vocabulary lacks never did
    assert not rows_of_ids[0].any(), rows_of_ids[0]
    assert all(row.any() for row in rows_of_ids[1:]), rows_of_ids

    scored = model.transform(data).select("item", "x", "prediction").toPandas()
    assert sorted(scored["item"]) == sorted(r[0] for r in rows)  # the user's column, kept as it was
    expected = trained.predict(
        {"item": scored["item"].to_numpy(np.int64)[:, None], "x": np.stack(scored["x"]).astype("float32")}, verbose=0
    )[:, 0]
    np.testing.assert_allclose(scored["prediction"].to_numpy(), expected, rtol=1e-5, atol=1e-6)
