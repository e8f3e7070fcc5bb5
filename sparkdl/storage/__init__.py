"""The storage room: every file sparkdl reads or writes, on the driver and on the nodes alike.

Local paths (a mounted shared file system included), ``s3://`` (``s3a://``, ``s3n://``), ``gs://``,
``abfs[s]://`` and ``hdfs://``/``viewfs://``, through ``pyarrow.fs`` (:mod:`.backends` says why),
configured as Spark and each cloud SDK are (:mod:`.settings`), never showing half a file
(:mod:`.files`), and checked before any work starts (:mod:`.preflight`). Imports only
``sparkdl.common``; every other room may use it.
"""

from .files import Storage
from .locations import Location, is_remote, parse
from .settings import StoreSettings

__all__ = ["Location", "Storage", "StoreSettings", "is_remote", "parse"]
