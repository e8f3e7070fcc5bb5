"""TFRecord files in a bucket (``s3_store``: an S3-protocol server reached by the standard AWS environment
alone): ``saveAsTFRecords`` to ``s3a://`` writes one whole object per partition (a local file uploaded),
refuses a prefix that already holds files, and ``loadTFRecords`` lists (a glob too) and reads them back.
(Local directories: tests/cluster/faces/test_dfutil_cluster.py.)"""

from __future__ import annotations

import uuid

import pytest

from sparkdl import dfutil

pytestmark = pytest.mark.timeout(480)


def test_tfrecords_saved_to_a_bucket_load_back(sc2, spark_holder, s3_store):
    spark = spark_holder.spark
    rows = [(i, [float(i), 0.5], f"n{i % 3}") for i in range(30)]
    frame = spark.createDataFrame(rows, "id long, x array<float>, name string").repartition(3)
    prefix = f"records-{uuid.uuid4().hex[:8]}"
    out = s3_store.url(prefix).replace("s3://", "s3a://")
    dfutil.saveAsTFRecords(frame, out)
    listed = s3_store.client.list_objects_v2(Bucket=s3_store.bucket, Prefix=prefix + "/")["Contents"]
    assert sorted(item["Key"][len(prefix) + 1 :] for item in listed) == ["part-r-00000", "part-r-00001", "part-r-00002"]
    with pytest.raises(FileExistsError, match="already holds files"):
        dfutil.saveAsTFRecords(frame, out)

    loaded = dfutil.loadTFRecords(sc2, out)
    assert sorted((r.id, r.x, r.name) for r in loaded.collect()) == [(i, x, name) for i, x, name in rows]
    two = dfutil.loadTFRecords(sc2, f"{out}/part-r-0000[01]")  # Hadoop's glob characters, as Spark reads them
    assert two.rdd.getNumPartitions() == 2 and 0 < two.count() < 30
    with pytest.raises(FileNotFoundError, match="no TFRecord files"):
        dfutil.loadTFRecords(sc2, s3_store.url(f"{prefix}-none"))
