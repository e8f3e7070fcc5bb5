"""A store ``log_dir`` for TensorBoard: the node writes summaries locally, this copies them up.

TensorFlow's summary writers and TensorBoard reach local paths and ``gs://`` only. With
``TFCluster.run(log_dir="s3://...")`` (or ``abfss://``, ``hdfs://``) each node's ``ctx.log_dir`` is a
local directory of the node, and its supervisor copies every new or grown file to the same place
under the store path every :data:`~sparkdl.common.timeouts.LOG_MIRROR_INTERVAL_S` seconds while the
node runs, and once more when it ends. Event files carry their host and process in their names, so
the nodes' files never collide. TensorBoard on the chief reads the local directory. The node's own
logs (``node.log``, ``supervisor.log``, ``error.json``...) are kept beside them, under
``<log_dir>/sparkdl-nodes/<cluster id>/<node>/``, so they outlive the executor that held them.
"""

from __future__ import annotations

import logging
import threading

from ..common.timeouts import LOG_MIRROR_INTERVAL_S, LOG_MIRROR_STOP_S
from ..storage import Storage, StoreSettings

logger = logging.getLogger(__name__)


class LogMirror:
    """Copies ``local_dir``'s new and changed files to ``store_path`` in a thread, until :meth:`stop`."""

    def __init__(
        self,
        local_dir: str,
        store_path: str,
        settings: StoreSettings,
        node_logs: tuple[str, str] | None = None,
        interval_s: float = LOG_MIRROR_INTERVAL_S,
    ):
        """``node_logs``: ``(the node's directory, where its files go in the store)``, copied too (its
        files only, not its subdirectories: caches, TensorBoard's own directory)."""
        self.local_dir = local_dir
        self.store_path = store_path
        self._node_logs = node_logs
        self._storage = Storage(settings)
        self._sent: dict[str, tuple[int, int]] = {}
        self._sent_logs: dict[str, tuple[int, int]] = {}
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
            copied = self._storage.mirror(self.local_dir, self.store_path, self._sent)
            if self._node_logs is not None:
                copied += self._storage.mirror(*self._node_logs, self._sent_logs, recursive=False)
            return copied
        except Exception as exc:  # noqa: BLE001 - a store error (or a client that cannot be made) must never
            # end the node or its supervisor: logged, and the next round tries again
            logger.warning("sparkdl: cannot copy TensorBoard logs to %s: %s", self.store_path, exc)
            return 0

    def stop(self) -> None:
        """Stop the thread, then copy what is left (not when the thread is still inside a copy after
        :data:`~sparkdl.common.timeouts.LOG_MIRROR_STOP_S`: two copies would share its bookkeeping)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(LOG_MIRROR_STOP_S)
        if not self._thread.is_alive():
            self.copy_once()
