"""The store settings of a Spark application, read on the driver (classic or Spark Connect)."""

from __future__ import annotations

from .settings import HADOOP_PREFIXES, StoreSettings


def from_spark(spark) -> StoreSettings:
    """The ``fs.s3a.*``, ``fs.azure.*`` and ``fs.gs.*`` settings of ``spark`` (a SparkContext or a
    SparkSession, classic or Connect; None: the active session's, if any): Hadoop's configuration
    (``spark.hadoop.*`` and ``core-site.xml``) with a SparkContext, ``spark.hadoop.*`` under Connect."""
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            return StoreSettings()
    sc = getattr(spark, "sparkContext", spark) if not _is_connect(spark) else None
    if sc is not None and getattr(sc, "_jsc", None) is not None:
        hadoop = sc._jsc.hadoopConfiguration()
        values = {}
        for prefix in HADOOP_PREFIXES:
            props = hadoop.getPropsWithPrefix(prefix)  # Hadoop 3: {name without prefix: value}
            for name in props.keySet().toArray():
                values[prefix + str(name)] = str(props.get(name))
        return StoreSettings.from_mapping(values)
    try:
        values = dict(spark.conf.getAll) if hasattr(spark.conf, "getAll") else {}
    except Exception:  # noqa: BLE001 - a Connect server that cannot list its conf: the environment alone
        values = {}
    return StoreSettings.from_mapping(values)


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")
