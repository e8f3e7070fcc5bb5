"""Every column a Spark user trains on, on a real two-executor Spark: image files (``binaryFile``),
Spark's image source, text, a 2^18-wide sparse Vector, arrays of varying length (numbers and
strings), several inputs, two labels and sample weights, in one DataFrame and one ``cluster.train``
call; each node records what it got row by row (epoch 1 from the feed, epoch 2 from its cache),
trains a model on all of it under MultiWorkerMirroredStrategy, and the model scores the same
DataFrame with the inference UDF. Then bad rows, skipped and counted, or failing named."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image as PILImage

from sparkdl import ClusterError, TFCluster
from sparkdl.columns import Image, Padded

import column_functions as cf
from image_bombs import png_bomb
from node_functions import wait_for_file

pytestmark = pytest.mark.timeout(420)
SPARK = TFCluster.InputMode.SPARK
FILES = 24


@pytest.fixture
def spark(sc2, spark_holder):
    return spark_holder.spark


def pixels(i: int, height: int = 8, width: int = 8, channels: int = 3) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 256, (height, width, channels), dtype=np.uint8)


def write_images(folder) -> dict[str, np.ndarray]:
    """24 files: 8x8 RGB, grey and RGBA PNGs, and 10x6 JPEGs; the RGB 8x8 pixels each should decode to."""
    folder.mkdir()
    expected = {}
    for i in range(FILES):
        kind = i % 4
        name = f"img{i:02d}.{'jpg' if kind == 3 else 'png'}"
        if kind == 0:
            array = pixels(i)
            PILImage.fromarray(array, "RGB").save(folder / name)
        elif kind == 1:
            grey = pixels(i, channels=1)[..., 0]
            PILImage.fromarray(grey, "L").save(folder / name)
            array = np.repeat(grey[..., None], 3, axis=2)  # grey decodes to RGB by repeating the value
        elif kind == 2:
            rgba = pixels(i, channels=4)
            PILImage.fromarray(rgba, "RGBA").save(folder / name)
            array = rgba[..., :3]  # alpha dropped
        else:
            PILImage.fromarray(pixels(i, 10, 6), "RGB").save(folder / name, quality=95)
            array = None  # lossy, and resized: checked by shape only
        expected[name] = array
    return expected


def meta_rows() -> list[tuple]:
    rows = []
    for i in range(FILES):
        vec = {(i * 997) % cf.VECTOR_SIZE: 1.0, (i * 31 + 70000) % cf.VECTOR_SIZE: 0.5}
        text = "déjà vu" if i == 5 else f"word{i % 5}"
        rows.append(
            (
                f"img{i:02d}.{'jpg' if i % 4 == 3 else 'png'}",
                i,
                text,
                vec,
                list(range(1 + i % 4)),
                ["w", "x", "y"][: i % 3],
                float(i % 3),
                i % 3,
                1.0 + i % 2,
            )
        )
    return rows


def every_kind_frame(spark, folder):
    from pyspark.ml.linalg import SparseVector, VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    files = spark.read.format("binaryFile").load(str(folder)).select("path", "content")
    images = spark.read.format("image").load(str(folder)).select("image")
    rows = [(n, i, t, SparseVector(cf.VECTOR_SIZE, v), *rest) for n, i, t, v, *rest in meta_rows()]
    fields = "name string, id long, text string, vec string, tokens array<long>, words array<string>, "
    schema = spark.createDataFrame([], fields + "y double, y2 long, w double").schema
    schema.fields[3] = T.StructField("vec", VectorUDT())
    meta = spark.createDataFrame(rows, T.StructType(schema.fields))
    name = lambda column: F.element_at(F.split(column, "/"), -1).alias("name")  # noqa: E731
    files = files.select(name("path"), "content")
    images = images.select(name("image.origin"), "image")
    joined = files.join(images, "name").join(meta, "name")
    return joined.select("id", "content", "image", "text", "vec", "tokens", "words", "y", "y2", "w")


def test_every_kind_of_column_trains_on_two_nodes_and_scores(spark, sc2, tmp_path):
    from sparkdl.inference import Predictor

    expected_pixels = write_images(tmp_path / "images")
    frame = every_kind_frame(spark, tmp_path / "images").repartition(3)
    model_path = str(tmp_path / "model.keras")
    cluster = TFCluster.run(
        sc2, cf.every_kind, {"out": str(tmp_path), "batch": 8, "model": model_path}, 2, input_mode=SPARK
    )
    cluster.train(frame, num_epochs=3)
    cluster.shutdown(timeout=200)
    nodes = [json.loads((tmp_path / f"node{n}.json").read_text()) for n in (0, 1)]

    meta = {row[1]: row for row in meta_rows()}
    for node in nodes:
        first, second = node["epochs"]
        assert first["rows"] == second["rows"], "epoch 2, replayed from the node's cache, gives every row as epoch 1"
        assert first["batches"] == second["batches"] == 2, "12 rows a node, in batches of 8"
        assert np.isfinite(node["loss"]).all()
    got = {int(i): row for node in nodes for i, row in node["epochs"][0]["rows"].items()}
    assert sorted(got) == list(range(FILES)), "every row reached a node"
    for row_id, row in got.items():
        name, _, text, vec, tokens, words, y, y2, w = meta[row_id]
        if expected_pixels[name] is not None:
            assert row["content"] == expected_pixels[name].tolist(), f"{name} decoded from its file"
            assert row["image"] == expected_pixels[name].tolist(), f"{name} from Spark's image source, BGR made RGB"
        assert row["text"] == text
        assert row["vec"] == [sorted(vec), [vec[k] for k in sorted(vec)]], "the sparse vector's own coordinates"
        assert row["tokens"] == tokens and row["words"] == (words + ["", "", ""])[:3]
        assert (row["y"], row["y2"], row["w"]) == (y, y2, w)

    # The model trained on the nodes scores the same DataFrame with the inference UDF.
    predictor = Predictor(
        model_path,
        input_mapping={c: c for c in ("content", "image", "text", "vec", "tokens", "words")},
        output_mapping={"a": "pred_a"},
        keep_columns=["id"],
        columns={"content": Image(8, 8, 3), "words": Padded()},  # the image struct and the rest follow the model
    )
    for arrow in (True, False):
        scored = {r["id"]: r["pred_a"] for r in predictor.transform(frame, arrow=arrow).collect()}
        assert sorted(scored) == list(range(FILES))
        chief = nodes[0]
        np.testing.assert_allclose([scored[i] for i in chief["probe_ids"]], chief["probe_a"], rtol=1e-4, atol=1e-5)


def png(i: int) -> bytes:
    out = io.BytesIO()
    PILImage.fromarray(pixels(i), "RGB").save(out, format="PNG")
    return out.getvalue()


def test_bad_rows_are_skipped_and_counted_or_fail_naming_column_partition_and_row(spark, sc2, tmp_path):
    from pyspark.sql import functions as F

    def frame(bad: dict):
        rows = [
            (
                i,
                png(i) if i not in bad.get("image", ()) else png(i)[:40],
                f"t{i}",
                list(range(4 if i in bad.get("long", ()) else 2)),
            )
            for i in range(16)
        ]
        data = spark.createDataFrame(rows, "id long, content binary, text string, tokens array<int>").coalesce(1)
        text = F.col("text")
        text = F.when(F.col("id").isin(*bad.get("null", [-1])), F.lit(None)).otherwise(text)
        text = F.when(F.col("id").isin(*bad.get("utf8", [-1])), F.unhex(F.lit("C328")).cast("string")).otherwise(text)
        if bad.get("bomb"):  # a 388,871-byte PNG declaring 20000x20000 pixels (1.2 GB decoded)
            bomb = F.when(F.col("id").isin(*bad["bomb"]), F.lit(png_bomb())).otherwise(F.col("content"))
            data = data.withColumn("content", bomb)
        return data.withColumn("text", text)

    cluster = TFCluster.run(sc2, cf.read_bad_rows, {"out": str(tmp_path)}, 2, input_mode=SPARK)
    try:
        cluster.train(frame({"image": [3], "null": [6], "utf8": [9], "long": [12]}), 1, bad_rows="skip")
        files = [tmp_path / f"run1-node{n}.json" for n in (0, 1)]
        assert all(wait_for_file(str(f), 60) for f in files), "each node writes its batches once it read its rows"
        runs = [json.loads(f.read_text())["batches"] for f in files]
        assert len(runs[0]) == len(runs[1]) == 2, "skipping rows never changes a node's number of batches"
        assert sorted(i for run in runs for batch in run for i in batch) == [
            i for i in range(16) if i not in (3, 6, 9, 12)
        ]
        counted = cluster.bad_rows
        assert sum(node["rows"] for node in counted.values()) == 4, counted
        assert all(
            "partition 0, row" in node["first"] and node["first"].startswith("column ") for node in counted.values()
        ), counted
        # A decompression bomb is a bad row, refused from its header: no node's memory grows for it.
        cluster.train(frame({"bomb": [5]}), 1, bad_rows="skip")
        files = [tmp_path / f"run2-node{n}.json" for n in (0, 1)]
        assert all(wait_for_file(str(f), 60) for f in files)
        runs = [json.loads(f.read_text()) for f in files]
        growth = [run["peak_growth_mb"] for run in runs]
        print(f"node peak memory growth reading the bomb: {growth} MB (RSS before: {[r['rss_mb'] for r in runs]} MB)")
        assert max(growth) < 100, growth
        assert sorted(i for run in runs for batch in run["batches"] for i in batch) == [i for i in range(16) if i != 5]
        assert sum(node["rows"] for node in cluster.bad_rows.values()) == 4 + 1
        assert [run["parallel"] for run in runs] == [1, 1], "images decode as many at once as the node's task has cores"
        # Without bad_rows="skip": the first bad row fails the node reading it, named.
        with pytest.raises(ClusterError, match=r"column 'content', partition 0, row 3: truncated PNG"):
            cluster.train(frame({"image": [3]}), 1)
    finally:
        cluster.shutdown(timeout=120)  # a no-op once a node failed: train stopped the cluster
