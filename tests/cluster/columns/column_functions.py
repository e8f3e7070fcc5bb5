"""Node functions for test_columns_cluster.py (beside them): every kind of column read with as_dataset,
recorded row by row on the node, then trained on; and bad rows read in both modes.

Imported by the nodes (conftest puts every test folder on their PYTHONPATH); TensorFlow only inside the functions.
"""

from __future__ import annotations

import json
from pathlib import Path

from node_functions import write_whole

FEATURES = {
    "id": "id",
    "content": "content",
    "image": "image",
    "text": "text",
    "vec": "vec",
    "tokens": "tokens",
    "words": "words",
}
VECTOR_SIZE = 1 << 18


def specs():
    """The specs the nodes and the scoring test read the columns with."""
    from sparkdl.columns import Image, Padded, Ragged, Sparse

    return {
        "content": Image(8, 8, 3),
        "image": Image(8, 8, 3),
        "vec": Sparse(dtype="float32"),
        "tokens": Ragged(),
        "words": Padded(3),
    }


def _record(x, y, w) -> dict:
    """Each row of one batch, by id, as JSON: what the node got for every column."""
    import numpy as np

    records = {}
    vec = x["vec"]
    rows = vec.indices.numpy()[:, 0]
    for i, row_id in enumerate(x["id"].numpy().tolist()):
        mine = rows == i
        records[str(row_id)] = {
            "content": x["content"][i].numpy().astype(int).tolist(),
            "image": x["image"][i].numpy().astype(int).tolist(),
            "text": x["text"][i].numpy().decode(),
            "vec": [vec.indices.numpy()[mine, 1].tolist(), vec.values.numpy()[mine].tolist()],
            "tokens": x["tokens"][i].numpy().tolist(),
            "words": [w_.decode() for w_ in x["words"][i].numpy().tolist()],
            "y": float(y["a"][i].numpy()),
            "y2": int(y["b"][i].numpy()),
            "w": float(w["a"][i].numpy()),
        }
        assert x["content"].dtype.name == "uint8" and tuple(x["content"].shape[1:]) == (8, 8, 3)
        assert vec.dense_shape.numpy()[1] == VECTOR_SIZE and isinstance(np.asarray(vec.values), np.ndarray)
    return records


def build_model(tf):
    """A multi-input, two-output Keras model that takes every kind at once."""
    k = tf.keras
    inputs = {
        "content": k.Input((8, 8, 3), dtype="uint8", name="content"),
        "image": k.Input((8, 8, 3), dtype="uint8", name="image"),
        "text": k.Input((), dtype="string", name="text"),
        "vec": k.Input((VECTOR_SIZE,), sparse=True, name="vec"),
        "tokens": k.Input((None,), ragged=True, dtype="int64", name="tokens"),
        "words": k.Input((3,), dtype="string", name="words"),
    }
    parts = [
        k.layers.Flatten()(k.layers.Rescaling(1 / 255)(inputs["content"])),
        k.layers.Flatten()(k.layers.Rescaling(1 / 255)(inputs["image"])),
        k.layers.CategoryEncoding(16, output_mode="one_hot")(k.layers.Hashing(16)(inputs["text"])),
        k.layers.Dense(4)(inputs["vec"]),
        k.layers.GlobalAveragePooling1D()(k.layers.Embedding(16, 3)(inputs["tokens"])),  # rows are never empty,
        k.layers.Flatten()(k.layers.Embedding(16, 2)(k.layers.Hashing(16)(inputs["words"]))),
    ]
    hidden = k.layers.Dense(8, activation="relu")(k.layers.Concatenate()(parts))
    outputs = {"a": k.layers.Dense(1, name="a")(hidden), "b": k.layers.Dense(3, name="b")(hidden)}
    model = k.Model(inputs, outputs)
    model.compile(
        optimizer=k.optimizers.Adam(0.01),
        loss={"a": "mse", "b": k.losses.SparseCategoricalCrossentropy(from_logits=True)},
    )
    return model


def every_kind(args, ctx):
    """Epochs 1 and 2 (queue, then cache): record every row; epoch 3: MWMS fit; save the model."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    dataset = feed.as_dataset(
        args["batch"],
        features=FEATURES,
        label={"a": "y", "b": "y2"},
        sample_weight={"a": "w", "b": "w"},
        columns=specs(),
    )
    seen, probe = [], None
    for _ in range(2):  # one iteration is one epoch
        records, batches = {}, 0
        for x, y, w in dataset:
            records.update(_record(x, y, w))
            batches += 1
            probe = probe or x
        seen.append({"rows": records, "batches": batches})
    with strategy.scope():
        model = build_model(tf)
    without_id = lambda x: {k: v for k, v in x.items() if k != "id"}  # noqa: E731
    history = model.fit(dataset.map(lambda x, y, w: (without_id(x), y, w)), epochs=1, verbose=0)
    with ctx.export_path(args["model"]) as target:
        model.save(target)
    predictions = model(without_id(probe), training=False)  # a plain call: predict() under MWMS shards its input
    Path(args["out"], f"node{ctx.executor_id}.json").write_text(
        json.dumps(
            {
                "epochs": seen,
                "loss": history.history["loss"],
                "probe_ids": probe["id"].numpy().tolist(),
                "probe_a": predictions["a"].numpy().reshape(-1).tolist(),
            }
        )
    )


def _memory_mb(field: str) -> float:
    """This process's ``VmRSS`` or ``VmHWM`` (its peak since the last :func:`_reset_peak`), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM starts again from VmRSS


def read_bad_rows(args, ctx):
    """Every training run: read one epoch of as_dataset, count rows per batch (skipped rows leave
    their batch) and write them with the node's peak memory growth while it read them and how many
    images it decodes at once; a run the driver gave up (its rows refused) is passed over."""
    from sparkdl.columns import Image, Padded
    from sparkdl.feed.dataset import decode_parallelism

    feed = ctx.get_data_feed()
    run = 0
    while not feed.should_stop():
        run += 1
        try:
            dataset = feed.as_dataset(
                4, features=["id", "content", "text", "tokens"], columns={"content": Image(8, 8), "tokens": Padded(3)}
            )
            rss = _memory_mb("VmRSS")
            _reset_peak()
            batches = [x["id"].numpy().tolist() for x in dataset]
            growth = _memory_mb("VmHWM") - rss
        except EOFError:  # the run was given up (the driver raised FeedDataError): go on to the next
            continue
        record = {"batches": batches, "rss_mb": rss, "peak_growth_mb": growth, "parallel": decode_parallelism(Image())}
        write_whole(Path(args["out"], f"run{run}-node{ctx.executor_id}.json"), json.dumps(record))


def read_dense_vectors(args, ctx):
    """One epoch of a Vector column read dense (the default) with as_dataset; record the rows and
    how far the node's resident memory rose above what it held before reading (its peak reset)."""
    import resource

    feed = ctx.get_data_feed()
    dataset = feed.as_dataset(args["batch"], features="features")
    before = _memory_mb("VmRSS")
    _reset_peak()
    rows, batches, width = 0, 0, 0
    for x in dataset:
        rows, batches, width = rows + int(x.shape[0]), batches + 1, int(x.shape[1])
    record = {
        "rows": rows,
        "batches": batches,
        "width": width,
        "rss_before_mib": before,
        "peak_growth_mib": _memory_mb("VmHWM") - before,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    write_whole(Path(args["out"], f"node{ctx.executor_id}.json"), json.dumps(record))
