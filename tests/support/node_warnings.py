"""The Python warnings a driver's console shows from the nodes' processes, read off its text.

A node's line on the driver's console starts with its role label (``[chief:0] ``, ``[worker:1] ``).
Such a line counts as a warning when it is

- the ``warnings`` module's report, ``path:line: SomeWarning: message`` (the source line it shows
  next is not counted again);
- a Python logging record at WARNING, ERROR or CRITICAL: in the node's logging format
  (``2026-01-02 03:04:05,678 WARNING keras: ...``, set by ``tf_process.configure_logging``), or in
  logging's and absl's default one (``WARNING:tensorflow:...``, ``WARNING:absl:...``);
- one of sparkdl's own start-up warnings (``sparkdl: WARNING: ...``).

TensorFlow's C++ log lines (``W0000 00:00:...``) are not Python warnings: they are not counted.
Lines without a node's label (the driver's own, Spark's) are not counted either.
"""

from __future__ import annotations

import re

#: A node's line: its role label, then what the node wrote.
NODE_LINE = re.compile(r"^\[[a-z]+:\d+\] (?P<text>.*)$")
#: What makes a node's line a warning (see the module docstring).
WARNING = re.compile(
    r":\d+: \w*Warning: "  # the warnings module
    r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:WARNING|ERROR|CRITICAL) "  # the node's logging format
    r"|^(?:WARNING|ERROR|CRITICAL):[\w.]*:"  # logging's and absl's default format
    r"|^sparkdl: WARNING: "
)


def node_warnings(console: str) -> list[str]:
    """The lines of ``console`` (a driver's output, carriage returns included) that are warnings from a node."""
    found = []
    for line in re.split(r"[\r\n]", console):
        node = NODE_LINE.match(line)
        if node and WARNING.search(node["text"]):
            found.append(line)
    return found
