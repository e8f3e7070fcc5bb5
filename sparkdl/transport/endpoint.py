"""A server's identity within its cluster, which the channel handshake binds (``channel.py``).

A client names the ``Endpoint`` it means to reach; a connection spliced onto another endpoint of
the same cluster then fails authentication on both ends.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """A server's identity within its cluster: the handshake is bound to it (see the module docstring)."""

    cluster: str
    node: str  # "driver" for the coordinator, "node<N>" for node N
    service: str  # "coordinator", "feed"

    @classmethod
    def coordinator(cls, cluster_id: str) -> "Endpoint":
        """The driver's coordinator of cluster ``cluster_id``."""
        return cls(cluster_id, "driver", "coordinator")

    @classmethod
    def feed(cls, cluster_id: str, node: int) -> "Endpoint":
        """The feed server of node number ``node``."""
        return cls(cluster_id, f"node{int(node)}", "feed")

    def encode(self) -> bytes:
        """An unambiguous byte form (each part length-prefixed), for the handshake's MACs."""
        return b"".join(
            struct.pack("!H", len(part)) + part
            for part in (p.encode() for p in (self.cluster, self.node, self.service))
        )

    def __str__(self) -> str:
        return f"{self.service} of {self.node} in cluster {self.cluster}"
