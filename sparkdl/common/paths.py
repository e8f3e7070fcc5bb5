"""Path helpers: TensorFlowOnSpark's rules for turning user paths into Hadoop-style URIs."""

from __future__ import annotations

import getpass
import logging

logger = logging.getLogger(__name__)

#: Schemes that are already fully qualified and pass through untouched. Hadoop also reads one slash
#: after the scheme: ``hdfs:/p`` and ``viewfs:/p`` (the default name node), ``dbfs:/p`` (Databricks'
#: DBFS), ``file:/p``.
QUALIFIED_SCHEMES = (
    "adl://",
    "abfs://",
    "abfss://",
    "dbfs:",
    "file://",
    "file:/",
    "gs://",
    "hdfs://",
    "hdfs:/",
    "oss://",
    "s3://",
    "s3a://",
    "s3n://",
    "swift://",
    "viewfs://",
    "viewfs:/",
    "wasb://",
    "wasbs://",
)


def normalize_default_fs(default_fs: str | None) -> str:
    """``fs.defaultFS`` without a trailing slash (``file:///`` becomes ``file://``)."""
    default_fs = default_fs or "file://"
    return default_fs[:-1] if default_fs.endswith("/") and not default_fs.endswith("://") else default_fs


def hdfs_path(default_fs: str, working_dir: str, path: str) -> str:
    """Qualify ``path`` the way TensorFlowOnSpark's ``TFNode.hdfs_path`` does.

    - a path with a known scheme is returned as is;
    - an absolute path is prefixed with the default filesystem;
    - a relative path goes under ``/user/<user>`` on HDFS/viewfs, under the node's working
      directory on ``file://``, and directly under the default filesystem otherwise.
    """
    default_fs = normalize_default_fs(default_fs)
    if path.lower().startswith(QUALIFIED_SCHEMES):
        return path
    if path.startswith("/"):
        return default_fs + path
    if default_fs.startswith(("hdfs://", "viewfs://")):
        return f"{default_fs}/user/{getpass.getuser()}/{path}"
    if default_fs.startswith("file://"):
        return f"{default_fs}/{working_dir.lstrip('/')}/{path}"
    logger.warning("unknown scheme in fs.defaultFS %r with relative path %r", default_fs, path)
    return f"{default_fs}/{path}"
