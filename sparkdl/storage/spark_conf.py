"""The store settings of a Spark application, read on the driver (classic or Spark Connect)."""

from __future__ import annotations

import logging

from .settings import HADOOP_PREFIXES, StoreSettings

logger = logging.getLogger(__name__)


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
        values, origins = {}, {}
        for prefix in HADOOP_PREFIXES:
            props = hadoop.getPropsWithPrefix(prefix)  # Hadoop 3: {name without prefix: value}
            for name in props.keySet().toArray():
                full = prefix + str(name)
                sources = [str(source) for source in (hadoop.getPropertySources(full) or [])]
                if sources and all(_is_default(source) for source in sources):
                    continue  # Hadoop's own defaults (core-default.xml) are not the user's settings
                values[full] = str(props.get(name))
                if sources and " from " in sources[-1]:  # e.g. "Set by Spark on host from AWS_ENDPOINT_URL"
                    origins[full] = f"{full}, set by Spark from {sources[-1].rsplit(' from ', 1)[1]}"
        return StoreSettings.from_mapping(values, origins)
    try:
        values = dict(spark.conf.getAll) if hasattr(spark.conf, "getAll") else {}
    except Exception as exc:  # noqa: BLE001 - a Connect server that cannot list its conf: the environment alone
        logger.warning(
            "sparkdl could not read the Spark Connect session's configuration (%s); store settings come from "
            "the environment only (spark.hadoop.fs.s3a.*, fs.azure.*, fs.gs.* are not applied)",
            type(exc).__name__,
        )
        values = {}
    return StoreSettings.from_mapping(values)


def _is_default(source: str) -> bool:
    return source.endswith("-default.xml") or source.startswith("Set by Spark to default")


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")
