"""A store ``log_dir`` for TensorBoard: the node writes summaries locally, this copies them up.

TensorFlow's summary writers and TensorBoard reach local paths and ``gs://`` only. With
``TFCluster.run(log_dir="s3://...")`` (or ``abfss://``, ``hdfs://``) each node's ``ctx.log_dir`` is a
local directory of the node, and its supervisor copies every new or grown file to the same place
under the store path every :data:`~sparkdl.common.timeouts.LOG_MIRROR_INTERVAL_S` seconds while the
node runs, and once more when it ends. Event files carry their host and process in their names, so
the nodes' files never collide. TensorBoard on the chief reads the local directory.
"""

from __future__ import annotations

import logging
import threading

from ..common.timeouts import LOG_MIRROR_INTERVAL_S
from ..storage import Storage, StoreSettings

logger = logging.getLogger(__name__)


class LogMirror:
    """Copies ``local_dir``'s new and changed files to ``store_path`` in a thread, until :meth:`stop`."""

    def __init__(
        self, local_dir: str, store_path: str, settings: StoreSettings, interval_s: float = LOG_MIRROR_INTERVAL_S
    ):
        self.local_dir = local_dir
        self.store_path = store_path
        self._storage = Storage(settings)
        self._sent: dict[str, tuple[int, int]] = {}
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sparkdl-log-mirror", daemon=True)

    def start(self) -> "LogMirror":
        """Start copying (returns itself)."""
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self.copy_once()

    def copy_once(self) -> int:
        """Copy what changed now; a store error is logged (the console is best effort), never raised."""
        try:
            return self._storage.mirror(self.local_dir, self.store_path, self._sent)
        except OSError as exc:  # StorageError included: the next round tries again
            logger.warning("sparkdl: cannot copy TensorBoard logs to %s: %s", self.store_path, exc)
            return 0

    def stop(self) -> None:
        """Stop the thread, then copy what is left."""
        self._stopped.set()
        self._thread.join(60)
        self.copy_once()
