"""TensorFlowOnSpark's ``dfutil``: DataFrames to TFRecord files of ``tf.train.Example`` and back.

``saveAsTFRecords(df, dir)`` writes one ``part-r-NNNNN`` file per partition, ``loadTFRecords(sc,
dir)`` reads them back as a DataFrame, on the executors with TensorFlow's own reader and writer.
Defined in :mod:`sparkdl.columns.tfrecords`.
"""

from .columns.tfrecords import (
    fromTFExample,
    infer_schema,
    isLoadedDF,
    loadTFRecords,
    saveAsTFRecords,
    toTFExample,
)

__all__ = ["isLoadedDF", "saveAsTFRecords", "loadTFRecords", "toTFExample", "fromTFExample", "infer_schema"]
