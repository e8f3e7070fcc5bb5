"""tests/support/node_warnings.py: which lines of a driver's console are Python warnings from a node
(what tests/cluster/examples/test_readme.py counts in the quickstart's console)."""

from __future__ import annotations

import pytest
from node_warnings import node_warnings

pytestmark = pytest.mark.timeout(60)

KERAS = "/venv/lib/python3.11/site-packages/keras/src/trainers/epoch_iterator.py"
#: A driver's console as the README's quickstart printed it before its warnings were fixed (shortened),
#: with lines that are not node warnings around them.
CONSOLE = "\n".join(
    [
        "26/12/02 09:36:10 WARN Utils: Your hostname, vm, resolves to a loopback address",  # Spark's, the driver's
        "\r[Stage 0:>                                                          (0 + 2) / 2]",
        "\r[chief:0] sparkdl: starting map_fun on NodeContext(chief:0, node_number=0, num_workers=2)",
        f"\r[chief:0] {KERAS}:74: UserWarning: `shuffle=True` was passed, but will be ignored",
        "[chief:0]   self.data_adapter = data_adapters.get_data_adapter(",  # the source line warnings shows
        f"[worker:0] {KERAS}:164: UserWarning: Your input ran out of data; interrupting training.",
        "[worker:0]   self._interrupted_warning()",
        "sparkdl train [0%]: epoch 1/10 · 1,798/1,798 rows fed, 0 read · partitions 2/2 · 3 s",
        "[chief:0] 2026-12-02 09:36:20,123 WARNING absl: You are saving your model as an HDF5 file",
        "[chief:0] 2026-12-02 09:36:20,124 INFO user: a Warning: in the user's own words",
        "[worker:0] WARNING:tensorflow:Gradients do not exist for variables",
        "[worker:0] W0000 00:00:1796204252.330354   20897 local_rendezvous.cc:404] Local rendezvous is aborting",
        "[chief:0] sparkdl: WARNING: SPARKDL_KERAS3_MULTI_WORKER=0 leaves Keras 3 unchanged",
        "[chief:0] Epoch 1/10",
        "/driver/app.py:3: UserWarning: the driver's own warning",
    ]
)


def test_python_warnings_from_nodes_are_counted_and_nothing_else():
    assert node_warnings(CONSOLE) == [
        f"[chief:0] {KERAS}:74: UserWarning: `shuffle=True` was passed, but will be ignored",
        f"[worker:0] {KERAS}:164: UserWarning: Your input ran out of data; interrupting training.",
        "[chief:0] 2026-12-02 09:36:20,123 WARNING absl: You are saving your model as an HDF5 file",
        "[worker:0] WARNING:tensorflow:Gradients do not exist for variables",
        "[chief:0] sparkdl: WARNING: SPARKDL_KERAS3_MULTI_WORKER=0 leaves Keras 3 unchanged",
    ]
    assert node_warnings("[chief:0] Epoch 1/10\n[worker:0] sparkdl: starting map_fun") == []
