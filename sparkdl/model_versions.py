"""Versioned model directories, laid out as TensorFlow Serving lays them out: train and serve.

``publish_version(base, version, write)`` adds a version atomically; ``ModelVersions(base)`` in
place of a model path scores with the newest one (:mod:`sparkdl.inference`). ``base`` is a local
path (a shared file system) or on any store of :mod:`sparkdl.storage` (``s3a://``, ``gs://``,
``abfss://``, ``hdfs://``). Defined in :mod:`sparkdl.inference.model_versions`.
"""

from .inference.model_versions import (
    ModelVersionError,
    ModelVersions,
    newest_version,
    publish_version,
    version_model_path,
)

__all__ = ["ModelVersions", "ModelVersionError", "publish_version", "newest_version", "version_model_path"]
