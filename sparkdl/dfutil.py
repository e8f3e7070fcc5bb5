"""TensorFlowOnSpark's ``dfutil``: DataFrames to TFRecord files of ``tf.train.Example`` and back.

``saveAsTFRecords(df, dir)`` writes one ``part-r-NNNNN`` file per partition, ``loadTFRecords(sc,
dir)`` reads them back as a DataFrame, on the executors with TensorFlow's own reader and writer.
Defined in :mod:`sparkdl.columns.tfrecords`. ``pack_tensors(df, columns)`` writes tensor columns
as packed ``binary`` rows, which ``Packed(shape, dtype)`` reads (:mod:`sparkdl.columns.packing`).
"""

from .columns.packing import pack_tensors
from .columns.tfrecords import (
    fromTFExample,
    infer_schema,
    isLoadedDF,
    loadTFRecords,
    saveAsTFRecords,
    toTFExample,
)

__all__ = [
    "isLoadedDF",
    "saveAsTFRecords",
    "loadTFRecords",
    "toTFExample",
    "fromTFExample",
    "infer_schema",
    "pack_tensors",
]
