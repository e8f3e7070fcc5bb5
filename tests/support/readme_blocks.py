"""The README's code blocks, and the program that runs the ones that claim to run.

The convention (docs/contributing.md, "The README's code runs"): a fence whose info string is
exactly ``python`` holds a whole program that runs as pasted; ``python no-run`` (any extra word
after ``python``) marks a fragment, shown only; any other language (``bash``, none) is never run.
``tests/unit/project/test_readme_lobby.py`` checks the extraction, ``tests/cluster/examples/test_readme.py``
runs the blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A fenced block: the opening fence (three or more backticks) with its info string, the body, the
#: same fence closing it. Only fences at the start of a line (the README nests none).
_FENCE = re.compile(r"^(?P<fence>`{3,})(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced code block: its info string, its text and the line its fence opens on (1-based)."""

    info: str
    code: str
    line: int

    @property
    def runs(self) -> bool:
        """Whether the block claims to run as pasted: its info string is exactly ``python``."""
        return self.info.split() == ["python"]


def code_blocks(markdown: str) -> list[Block]:
    """Every fenced code block of ``markdown``, in order."""
    return [
        Block(info=match["info"].strip(), code=match["body"], line=markdown.count("\n", 0, match.start()) + 1)
        for match in _FENCE.finditer(markdown)
    ]


def runnable_blocks(markdown: str) -> list[Block]:
    """The blocks that claim to run as pasted."""
    return [block for block in code_blocks(markdown) if block.runs]


#: Runs each block as its own ``__main__`` program, one after another in this one process, so they
#: share one Spark application: a block's ``getOrCreate()`` returns the session a block before it
#: started, and its ``spark.stop()`` is deferred to the end (then run once). Prints one line per block.
_RUNNER = """
import sys, time
from pyspark.sql import SparkSession

stops = []
_stop = SparkSession.stop
SparkSession.stop = lambda session: stops.append(session)
for index, (line, code) in enumerate(BLOCKS, 1):
    started = time.monotonic()
    print(f"README block {index} (line {line}): running", flush=True)
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__main__"})
    print(f"README block {index} (line {line}): ok in {time.monotonic() - started:.1f} s", flush=True)
SparkSession.stop = _stop
active = SparkSession.getActiveSession()
if active is not None:
    active.stop()
print(f"README blocks: {len(BLOCKS)} ran; spark.stop() called {len(stops)} times", flush=True)
"""


def runner_program(blocks: list[Block]) -> str:
    """A Python program that runs ``blocks`` as described above."""
    return f"BLOCKS = {[(block.line, block.code) for block in blocks]!r}\n{_RUNNER}"
