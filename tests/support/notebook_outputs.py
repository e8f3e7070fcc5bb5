"""Notebook outputs as Jupyter records them, for the notebooks under notebooks/.

``tests/cluster/examples/test_notebooks.py`` runs each notebook with a ``NotebookCapture`` and,
with ``SPARKDL_WRITE_NOTEBOOK_OUTPUTS=1``, writes what it captured into the notebook
(``with_outputs``); otherwise it compares the committed outputs' ``shape`` with this run's.
``tests/unit/project/test_notebooks_units.py`` checks the committed outputs without Spark.

What varies from run to run is left out of the comparison: the text itself (timings, ports,
accuracies), stderr, and the lines that background threads print whenever they arrive (the
nodes' forwarded output, periodic progress lines). What the written outputs must not carry is
scrubbed (``scrub``): this machine's paths, host names and addresses.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import pprint
import re
import socket
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import nbformat

#: Set to 1 to write the outputs of the notebook test's run into the notebooks.
WRITE_ENV = "SPARKDL_WRITE_NOTEBOOK_OUTPUTS"
#: The notebook metadata key holding the digest of the code its outputs came from.
METADATA_KEY = "sparkdl"
#: Resolution of the figures' PNGs (a 6-inch figure is 600 pixels wide).
FIGURE_DPI = 100

REPO = Path(__file__).resolve().parents[2]

# A line some background thread printed, at no fixed point of the cell that shows it: a node's
# forwarded output ("[chief:0] ...", "[sparkdl] 3 lines of node output were not shown ..."), or
# a periodic progress line of cluster.train or cluster.inference.
_BACKGROUND_LINE = re.compile(r"\[[a-z]+:\d+\] |\[sparkdl\] |sparkdl train \[\d+%\]|sparkdl inference: ")
# An IPv4 address: the driver's and the nodes' (whichever machine wrote the outputs).
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
# tempfile.mkdtemp's random part: 8 characters after the prefix.
_MKDTEMP_NAME = r"(?P<prefix>[\w.-]*?[-_]|tmp)[a-z0-9_]{8}(?![\w-])"


def writing() -> bool:
    """Whether this run writes its outputs into the notebooks (``SPARKDL_WRITE_NOTEBOOK_OUTPUTS``)."""
    return os.environ.get(WRITE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def code_cells(nb) -> list:
    """The notebook's code cells, in order."""
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def code_digest(nb) -> str:
    """A digest of every code cell's source: the outputs are stale when it changes."""
    sources = "\0".join(cell.source for cell in code_cells(nb))
    return hashlib.sha256(sources.encode()).hexdigest()[:16]


def recorded_digest(nb) -> str | None:
    """The code digest recorded when the outputs were written (None: never written)."""
    return nb.metadata.get(METADATA_KEY, {}).get("code_sha256")


class _CellStream(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` during a notebook run: every write goes to the running
    cell's outputs, and on to the stream it replaced (pytest shows it if the test fails)."""

    def __init__(self, capture: NotebookCapture, name: str, original):
        super().__init__()
        self.capture, self.name, self.original = capture, name, original

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False  # as in Jupyter: sparkdl prints plain progress lines, not bars

    def write(self, text: str) -> int:
        self.capture.add_stream(self.name, text)
        with contextlib.suppress(Exception):  # the echo is best effort
            self.original.write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self.original.flush()


class NotebookCapture:
    """A notebook run's outputs, one list per code cell, as a Jupyter kernel records them:
    stdout and stderr as ``stream`` outputs (a background thread's lines go to the cell running
    when they arrive), a cell's last value as ``execute_result``, matplotlib figures as
    ``display_data`` PNGs (at ``plt.show()`` and at the cell's end, then closed)."""

    def __init__(self):
        self.cells: list[list] = []
        self._lock = threading.Lock()

    def start_cell(self) -> int:
        """Begin a code cell's outputs; returns its execution count (1, 2, ...)."""
        with self._lock:
            self.cells.append([])
            return len(self.cells)

    def add_stream(self, name: str, text: str) -> None:
        """Append ``text`` to the running cell's ``name`` stream, as one output with the text before it."""
        if not text:
            return
        with self._lock:
            if not self.cells:
                return
            outputs = self.cells[-1]
            if outputs and outputs[-1].output_type == "stream" and outputs[-1].name == name:
                outputs[-1].text += text
            else:
                outputs.append(nbformat.v4.new_output("stream", name=name, text=text))

    def add_result(self, value, execution_count: int) -> None:
        """The cell's last expression's value, shown as IPython shows it (text, and HTML if the value has it)."""
        data = {"text/plain": pprint.pformat(value, sort_dicts=False)}
        to_html = getattr(value, "_repr_html_", None)
        html = to_html() if callable(to_html) and not isinstance(value, type) else None
        if isinstance(html, str):
            data["text/html"] = html
        self._add(nbformat.v4.new_output("execute_result", data=data, execution_count=execution_count))

    def add_figures(self) -> None:
        """Every open matplotlib figure as a PNG ``display_data``, then closed (Jupyter's inline backend)."""
        import matplotlib.pyplot as plt

        for number in plt.get_fignums():
            figure = plt.figure(number)
            png = io.BytesIO()
            figure.savefig(
                png, format="png", dpi=FIGURE_DPI, bbox_inches="tight", facecolor="white", metadata={"Software": None}
            )
            data = {"image/png": base64.b64encode(png.getvalue()).decode("ascii"), "text/plain": repr(figure)}
            self._add(nbformat.v4.new_output("display_data", data=data))
        plt.close("all")

    def _add(self, output) -> None:
        with self._lock:
            self.cells[-1].append(output)

    @contextlib.contextmanager
    def installed(self):
        """Capture ``sys.stdout``, ``sys.stderr`` and ``plt.show()`` while the notebook runs (in
        the test's body: pytest sets its own ``sys.stdout`` around each test phase)."""
        import matplotlib.pyplot as plt

        saved = sys.stdout, sys.stderr, plt.show
        sys.stdout = _CellStream(self, "stdout", saved[0])
        sys.stderr = _CellStream(self, "stderr", saved[1])
        plt.show = lambda *args, **kwargs: self.add_figures()
        try:
            yield self
        finally:
            sys.stdout, sys.stderr, plt.show = saved


def shape(outputs) -> list[str]:
    """A cell's outputs as the kinds that a run gives every time: ``stdout`` (when the cell
    printed lines of its own), ``execute_result:<mime types>``, ``display_data:<mime types>``.
    Text, stderr and background threads' lines (``_BACKGROUND_LINE``) vary from run to run."""
    kinds: list[str] = []
    for output in outputs:
        if output.output_type == "stream":
            own = output.name == "stdout" and any(
                line.strip() and not _BACKGROUND_LINE.match(line) for line in output.text.splitlines()
            )
            if own and kinds[-1:] != ["stdout"]:
                kinds.append("stdout")
        elif output.output_type in ("execute_result", "display_data"):
            kinds.append(f"{output.output_type}:{'+'.join(sorted(output.data))}")
        else:
            kinds.append(output.output_type)
    return kinds


def _machine_names() -> list[str]:
    """This machine's host names and addresses, as the nodes and Spark print them."""
    names = {socket.gethostname(), socket.getfqdn()}
    for name in list(names):
        with contextlib.suppress(OSError):
            names.add(socket.gethostbyname(name))
    return sorted((n for n in names if n and n != "localhost" and not n.startswith("127.")), key=len, reverse=True)


def scrub(text: str) -> str:
    """``text`` without what belongs to this machine: installed packages' paths become
    ``.../site-packages``, this checkout's path goes, temporary folders become
    ``/tmp/<prefix>XXXXXXXX``, the home folder ``~``, host names and IPv4 addresses (but
    loopback) ``localhost``."""
    for key in ("purelib", "platlib", "stdlib"):
        path = sysconfig.get_paths()[key]
        text = text.replace(path, f".../{Path(path).name}")
    text = text.replace(f"{REPO}{os.sep}", "")
    temp = re.escape(tempfile.gettempdir())
    text = re.sub(rf"{temp}/pytest-of-[^/\s]+/pytest-\d+", "/tmp/pytest", text)
    text = re.sub(rf"{temp}/{_MKDTEMP_NAME}", r"/tmp/\g<prefix>XXXXXXXX", text)
    text = re.sub(rf"{temp}(?=/)", "/tmp", text)
    text = text.replace(str(Path.home()) + os.sep, "~" + os.sep)
    for name in _machine_names():
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", "localhost", text)
    return _IPV4.sub(lambda match: match[0] if match[0].startswith(("127.", "0.")) else "localhost", text)


def _scrubbed(output):
    if output.output_type == "stream":
        output.text = scrub(output.text)
    elif "data" in output:
        for mime in ("text/plain", "text/html"):
            if mime in output.data:
                output.data[mime] = scrub(output.data[mime])
    return output


def with_outputs(nb, outputs_per_cell: list[list]):
    """``nb`` with each code cell's captured outputs (scrubbed) and execution count, and the
    digest of the code they came from; validated against the notebook format."""
    cells = code_cells(nb)
    assert len(cells) == len(outputs_per_cell), (len(cells), len(outputs_per_cell))
    for count, (cell, outputs) in enumerate(zip(cells, outputs_per_cell), start=1):
        cell.execution_count = count
        cell.outputs = [_scrubbed(output) for output in outputs]
    nb.metadata[METADATA_KEY] = {"code_sha256": code_digest(nb)}
    nbformat.validate(nb)
    return nb
