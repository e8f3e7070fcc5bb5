"""TensorFlowOnSpark's ``dfutil``: DataFrames to TFRecord files of ``tf.train.Example`` and back.

The files are written and read on the executors by TensorFlow itself (``tf.io.TFRecordWriter``,
``tf.data.TFRecordDataset``), so no TFRecord JAR is needed. Every path goes through
:class:`sparkdl.storage.Storage` with the application's store settings (local paths, ``s3a://``,
``gs://``, ``abfss://``, ``hdfs://``): a task writes its partition's file locally, then renames it
into place or uploads it as one object (whole or absent; a retried task replaces it), and reads a
store's file from a local copy. The driver lists and creates directories through the same storage
layer and never imports TensorFlow. A saved directory
holds one ``part-r-NNNNN`` file per partition, like TensorFlowOnSpark's (Hadoop's) output, which
``tf.data.TFRecordDataset`` reads inside a node as is.

Column types, as in TensorFlowOnSpark: floats and doubles become a ``FloatList`` (float32),
integers and booleans an ``Int64List``, strings (UTF-8) and binary a ``BytesList``, arrays of
those the same lists; sparkdl adds ``pyspark.ml`` Vectors (a ``FloatList``) and nulls (an empty
list, read back as null). Reading infers the schema from the first record: a list of one value
is a scalar, of several an array; int64 is ``long``, float ``double``, bytes ``string`` unless
named in ``binary_features``.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
import uuid
from typing import Any, Callable, Iterable, Iterator

from ..storage import Storage, StoreSettings, is_remote, locations, parse, spark_conf

FLOAT_TYPES = ("float", "double")
INT64_TYPES = ("boolean", "tinyint", "smallint", "int", "bigint", "long")
BYTES_TYPES = ("string", "binary")
LOADED_FROM = "_sparkdl_tfrecords_dir"  # attribute marking a DataFrame made by loadTFRecords


def isLoadedDF(df) -> bool:  # noqa: N802 - TensorFlowOnSpark's name
    """Whether ``df`` is a DataFrame that :func:`loadTFRecords` returned (not one derived from it)."""
    return getattr(df, LOADED_FROM, None) is not None


def saveAsTFRecords(df, output_dir: str) -> None:  # noqa: N802
    """Write ``df`` as TFRecord files of ``tf.train.Example``, one ``part-r-NNNNN`` per partition.

    ``output_dir`` is resolved like Spark resolves paths (the default file system for a path
    without a scheme) and must not hold files yet (as with Hadoop's output formats). Raises
    ValueError naming the column for a type that has no ``tf.train.Feature`` (maps, structs).
    """
    dtypes = df.dtypes
    for name, dtype in dtypes:
        _feature_kind(name, dtype)  # fail on the driver, before any task runs
    sc = df.sparkSession.sparkContext
    settings = spark_conf.from_spark(sc)
    target = _prepare_output(sc, Storage(settings), output_dir)
    to_example = toTFExample(dtypes)

    def write(index: int, rows: Iterable) -> Iterator[int]:
        import tensorflow as tf

        final = f"{target}/part-r-{index:05d}"
        remote = is_remote(target)
        scratch = tempfile.mkdtemp(prefix="sparkdl-tfrecords-") if remote else None
        partial = os.path.join(scratch or target, f".part-r-{index:05d}.{uuid.uuid4().hex}.tmp")
        count = 0
        try:
            with tf.io.TFRecordWriter(partial) as writer:
                for record, _ in to_example(rows):
                    writer.write(bytes(record))
                    count += 1
            if remote:
                Storage(settings).upload(partial, final)  # one object: whole or absent
            else:
                os.replace(partial, final)  # a retried task replaces, never duplicates
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            elif os.path.exists(partial):
                os.remove(partial)
        yield count

    df.rdd.mapPartitionsWithIndex(write).sum()


def loadTFRecords(sc, input_dir: str, binary_features: list[str] | tuple[str, ...] = ()):  # noqa: N802
    """A DataFrame of the ``tf.train.Example`` records in the TFRecord files under ``input_dir``.

    Files whose names start with ``_`` or ``.`` are skipped (Hadoop's convention). The schema is
    inferred from the first record (:func:`infer_schema`); bytes features are strings unless
    named in ``binary_features``; a column that is an array in the first record is an array in
    every row, and a feature a record lacks is null. One partition per file.
    """
    from pyspark.sql import SparkSession

    settings = spark_conf.from_spark(sc)
    files = _list_files(sc, Storage(settings), input_dir)
    if not files:
        raise FileNotFoundError(f"no TFRecord files under {input_dir}")
    binary = list(binary_features)
    records = sc.parallelize(files, len(files)).flatMap(lambda path: _read_records(path, settings))
    schemas = records.mapPartitions(lambda it: [_schema_of_first(it, binary)]).filter(lambda s: s is not None)
    first = schemas.take(1)
    if not first:
        raise ValueError(f"the TFRecord files under {input_dir} hold no records")
    schema = first[0]
    names = [f.name for f in schema.fields]
    arrays = {f.name for f in schema.fields if f.dataType.typeName() == "array"}
    df = SparkSession.builder.getOrCreate().createDataFrame(
        records.mapPartitions(lambda it: _conform(fromTFExample(it, binary), names, arrays)), schema
    )
    setattr(df, LOADED_FROM, input_dir)
    return df


def toTFExample(dtypes: list[tuple[str, str]]) -> Callable[[Iterable], list]:  # noqa: N802
    """A ``mapPartitions`` function turning Rows with these ``DataFrame.dtypes`` into
    ``(bytearray(serialized tf.train.Example), None)`` pairs."""
    kinds = [(name, _feature_kind(name, dtype)) for name, dtype in dtypes]

    def to_examples(rows: Iterable) -> list:
        import tensorflow as tf

        results = []
        for row in rows:
            features = {name: _feature(tf, kind, row[name]) for name, kind in kinds}
            example = tf.train.Example(features=tf.train.Features(feature=features))
            results.append((bytearray(example.SerializeToString()), None))
        return results

    return to_examples


def fromTFExample(iter: Iterable, binary_features: list[str] | tuple[str, ...] = ()) -> list:  # noqa: A002,N802
    """A ``mapPartitions`` function turning serialized ``tf.train.Example`` records (bytes, or
    ``(bytes, None)`` pairs) into Rows: one value as a scalar, several as a list, none as None."""
    import tensorflow as tf
    from pyspark.sql import Row

    rows = []
    for record in iter:
        example = tf.train.Example()
        example.ParseFromString(bytes(record[0] if isinstance(record, tuple) else record))
        rows.append(
            Row(
                **{
                    name: _value(name, feature, binary_features)
                    for name, feature in sorted(example.features.feature.items())
                }
            )
        )
    return rows


def infer_schema(example, binary_features: list[str] | tuple[str, ...] = ()):
    """The Spark schema (``StructType``, columns sorted by name) of a ``tf.train.Example``."""
    from pyspark.sql import types as T

    def sql_type(name: str, feature) -> T.DataType:
        if name in binary_features:
            return T.BinaryType()
        if feature.int64_list.value:
            values, base = feature.int64_list.value, T.LongType()
        elif feature.float_list.value:
            values, base = feature.float_list.value, T.DoubleType()
        else:
            values, base = feature.bytes_list.value, T.StringType()
        return T.ArrayType(base) if len(values) > 1 else base

    return T.StructType(
        [
            T.StructField(name, sql_type(name, feature), True)
            for name, feature in sorted(example.features.feature.items())
        ]
    )


# -- internals --


def _feature_kind(name: str, dtype: str) -> str:
    """Which ``tf.train.Feature`` list a column of Spark type ``dtype`` becomes."""
    base = dtype[len("array<") : -1] if dtype.startswith("array<") else dtype
    if base in FLOAT_TYPES or dtype == "vector":
        return "float"
    if base in INT64_TYPES:
        return "int64"
    if base in BYTES_TYPES:
        return "binary" if base == "binary" else "string"
    raise ValueError(
        f"column {name!r} has type {dtype}, which has no tf.train.Feature; supported: numbers, "
        "booleans, strings, binary, arrays of them, and pyspark.ml Vectors"
    )


def _feature(tf, kind: str, value: Any):
    if value is None:
        values = []
    elif hasattr(value, "toArray"):
        values = value.toArray().tolist()
    else:
        values = list(value) if isinstance(value, (list, tuple)) else [value]
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
    encoded = [bytes(v) if kind == "binary" else str(v).encode("utf-8") for v in values]
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=encoded))


def _value(name: str, feature, binary_features) -> Any:
    if feature.int64_list.value:
        values = list(feature.int64_list.value)
    elif feature.float_list.value:
        values = list(feature.float_list.value)
    elif feature.bytes_list.value:
        raw = feature.bytes_list.value
        values = [bytearray(v) if name in binary_features else v.decode("utf-8") for v in raw]
    else:
        return None
    return values if len(values) > 1 else values[0]


def _conform(rows: list, names: list[str], arrays: set[str]) -> list:
    """Rows with every column of the schema (None where a record lacks a feature), array columns as
    lists (a record whose list held one value gave a scalar)."""
    from pyspark.sql import Row

    fixed = []
    for row in rows:
        values = row.asDict()
        out = {}
        for name in names:
            value = values.get(name)
            out[name] = [value] if name in arrays and value is not None and not isinstance(value, list) else value
        fixed.append(Row(**out))
    return fixed


def _schema_of_first(records: Iterator, binary_features):
    import tensorflow as tf

    for record in records:
        example = tf.train.Example()
        example.ParseFromString(bytes(record))
        return infer_schema(example, binary_features)
    return None


def _read_records(path: str, settings: StoreSettings) -> Iterator[bytes]:
    """The records of one TFRecord file: a local one read in place, a store's from a local copy."""
    import tensorflow as tf

    scratch = None
    try:
        if is_remote(path):
            scratch = tempfile.mkdtemp(prefix="sparkdl-tfrecords-")
            local = os.path.join(scratch, "records")
            Storage(settings).download(path, local)
            path = local
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            yield bytes(record)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _qualified(sc, path: str) -> str:
    """``path`` as Spark resolves it (on ``fs.defaultFS`` without a scheme); a local one absolute."""
    default_fs = sc._jsc.hadoopConfiguration().get("fs.defaultFS") if getattr(sc, "_jsc", None) else None
    qualified = locations.qualify(path, default_fs)
    location = parse(qualified)
    return location.key if location.is_local else qualified.rstrip("/")


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


def _prepare_output(sc, storage: Storage, output_dir: str) -> str:
    target = _qualified(sc, output_dir)
    if storage.exists(target):
        if [name for name, _ in storage.listdir(target) if not _hidden(name)]:
            raise FileExistsError(f"output directory {target} already holds files; remove it or choose another")
    else:
        storage.mkdirs(target)  # nothing to do in an object store, whose directories are key prefixes
    return target


def _glob(storage: Storage, path: str) -> list[str]:
    """The paths matching ``path`` (Hadoop's glob characters ``*``, ``?``, ``[...]`` in any component)."""
    parts = path.split("/")
    first = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[")), None)
    if first is None:
        return [path] if storage.exists(path) else []
    candidates = ["/".join(parts[:first]) or "/"]
    for part in parts[first:]:
        expanded = []
        for candidate in candidates:
            if any(c in part for c in "*?["):
                names = sorted(name for name, _ in storage.listdir(candidate) if fnmatch.fnmatchcase(name, part))
                expanded += [f"{candidate.rstrip('/')}/{name}" for name in names]
            else:
                expanded.append(f"{candidate.rstrip('/')}/{part}")
        candidates = expanded
    return [candidate for candidate in candidates if storage.exists(candidate)]


def _list_files(sc, storage: Storage, input_dir: str) -> list[str]:
    files = []
    for match in _glob(storage, _qualified(sc, input_dir)):
        if storage.is_dir(match):
            files += [f"{match}/{name}" for name, is_dir in storage.listdir(match) if not is_dir and not _hidden(name)]
        elif not _hidden(parse(match).name):
            files.append(match)
    return sorted(files)


__all__ = ["isLoadedDF", "saveAsTFRecords", "loadTFRecords", "toTFExample", "fromTFExample", "infer_schema"]
