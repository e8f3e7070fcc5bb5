#!/usr/bin/env python
"""Write ``docs/api.md``, sparkdl's API reference, from the docstrings and signatures of the code.

Usage::

    python scripts/gen_api_docs.py            # rewrite docs/api.md
    python scripts/gen_api_docs.py --check    # exit 1 if docs/api.md is out of date

Only the standard library's ``inspect`` is used: the reference is exactly what the
code says at run time, so a new argument, method or docstring shows up on the next run.
``tests/test_docs.py`` fails when ``docs/api.md`` differs from what this script generates.

What is covered (``SECTIONS``): a module's ``__all__`` (or, without one, the public names the
module itself defines), or an explicit list of names. Classes list their public methods,
properties and documented attributes, including those inherited from other sparkdl classes;
members inherited from PySpark or the standard library are left out. Each class and function
is documented once, in the first section that names it (the package section only re-exports);
other sections link to it. Attributes are documented Sphinx-style with a ``#:`` comment on the
line that assigns them (or the lines just above).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "api.md"
LINE_WIDTH = 100

#: Classes sparkdl creates for the user (``run()`` returns a TFCluster, ``map_fun`` receives the
#: context, ``ctx.get_data_feed()`` returns the feed): their constructors are not shown.
NOT_CONSTRUCTED_BY_USERS = frozenset(
    {
        "sparkdl.driver.cluster.TFCluster",
        "sparkdl.node.context.NodeContext",
        "sparkdl.feed.data_feed.DataFeed",
        "sparkdl.feed.micro_batches.MicroBatch",
        "sparkdl.node.stream_checkpoint.StreamCheckpoint",
        "sparkdl.driver.streaming.StreamingTraining",
    }
)


@dataclasses.dataclass(frozen=True)
class Section:
    """One part of the reference: a module and which of its names to document."""

    module: str
    title: str
    names: tuple[str, ...] | None = None  # None: __all__, else the public names defined in the module
    intro: str = ""


SECTIONS = (
    Section("sparkdl", "Package", intro="What `import sparkdl` / `from sparkdl import ...` provides."),
    Section(
        "sparkdl.TFCluster",
        "Cluster (driver)",
        intro="`from sparkdl import TFCluster`, as with TensorFlowOnSpark's `tensorflowonspark.TFCluster`.",
    ),
    Section(
        "sparkdl.node.context",
        "Node context (`ctx`)",
        names=("NodeContext",),
        intro="The `ctx` argument of `map_fun(args, ctx)`.",
    ),
    Section(
        "sparkdl.feed.data_feed",
        "Data feed (InputMode.SPARK)",
        names=("DataFeed",),
        intro="What `ctx.get_data_feed()` and `TFNode.DataFeed(ctx.mgr)` return inside a node.",
    ),
    Section("sparkdl.TFNode", "Node helpers", intro="`from sparkdl import TFNode`."),
    Section("sparkdl.TFParallel", "Independent nodes", intro="`from sparkdl import TFParallel`."),
    Section("sparkdl.inference", "Inference", intro="`from sparkdl.inference import ...`."),
    Section(
        "sparkdl.model_versions",
        "Versioned models (train and serve)",
        intro="`from sparkdl.model_versions import publish_version, ModelVersions`: TF Serving's "
        "`base/<version>/` layout, published atomically, scored with the newest version.",
    ),
    Section(
        "sparkdl.feed.micro_batches",
        "Streaming micro-batches (node side)",
        names=("MicroBatch",),
        intro="What `feed.micro_batches(checkpoint)` yields inside a node (`cluster.train_stream`).",
    ),
    Section(
        "sparkdl.node.stream_checkpoint",
        "Streaming checkpoints (node side)",
        names=("StreamCheckpoint",),
        intro="What `ctx.stream_checkpoint(directory, model=model)` returns: the model and its last micro-batch.",
    ),
    Section(
        "sparkdl.driver.streaming",
        "Streaming training (driver)",
        names=("StreamingTraining",),
        intro="What `cluster.train_stream(df, checkpoint_location)` returns.",
    ),
    Section(
        "sparkdl.ml",
        "Spark ML pipeline stages",
        names=("TFEstimator", "TFModel"),
        intro="`from sparkdl.ml import TFEstimator, TFModel`.",
    ),
    Section(
        "sparkdl.keras",
        "Keras on Spark ML: KerasEstimator, KerasModel",
        intro="`from sparkdl.keras import KerasEstimator, KerasModel` (also from `sparkdl.ml`): a Keras model "
        "and a DataFrame in, a fitted Spark ML model out. Each Param has a camel-case setter and getter "
        "(`setEpochs`/`getEpochs`).",
    ),
    Section(
        "sparkdl.params",
        "Spark ML Params (TensorFlowOnSpark's mixins)",
        intro="The `Has*` Param mixins `TFEstimator` and `TFModel` are built from, with TensorFlowOnSpark's "
        "accessors; `sparkdl.pipeline` re-exports them.",
    ),
    Section(
        "sparkdl.pipeline",
        "TensorFlowOnSpark's `pipeline` module",
        intro="`from sparkdl.pipeline import TFEstimator, TFModel, Namespace, ...`, as from "
        "`tensorflowonspark.pipeline`.",
    ),
    Section("sparkdl.compat", "TensorFlowOnSpark's `compat` module", intro="`from sparkdl import compat`."),
    Section(
        "sparkdl.dfutil",
        "TensorFlowOnSpark's `dfutil` module",
        intro="`from sparkdl import dfutil`: DataFrames to TFRecord files and back, without a JAR.",
    ),
    Section("sparkdl.util", "TensorFlowOnSpark's `util.single_node_env`", names=("single_node_env",)),
    Section("sparkdl.gpu_info", "TensorFlowOnSpark's `gpu_info` module"),
    Section("sparkdl.errors", "Errors", intro="Raised at the driver."),
    Section(
        "sparkdl.feed.feeder",
        "Feed errors",
        names=("FeedError",),
        intro="Raised by `cluster.train()` / `cluster.inference()`.",
    ),
    Section("sparkdl.feed.columns", "Feed data errors", names=("FeedDataError",)),
    Section("sparkdl.gpus", "GPU selection errors", names=("GPUSelectionError",)),
    Section(
        "sparkdl.feed.results",
        "Inference result errors",
        names=("ResultsError",),
        intro="Raised in `map_fun` by `feed.batch_results()`.",
    ),
)


@dataclasses.dataclass
class Entry:
    """One documented object, for the checks in ``tests/test_docs.py``."""

    qualname: str
    kind: str  # module, class, function, method, property, attribute, param, data
    doc: str

    @property
    def needs_docstring(self) -> bool:
        """Modules, classes, functions, methods and properties must carry a docstring."""
        return self.kind in ("module", "class", "function", "method", "property")


class _Raw:
    """An annotation kept as its source text (``from __future__ import annotations`` makes them strings)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|exc|data|obj):`~?([^`]+)`")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _annotation(value: Any) -> Any:
    if value is inspect.Parameter.empty:
        return value
    return _Raw(value if isinstance(value, str) else inspect.formatannotation(value))


def _signature(obj: Any, drop_first: bool = False) -> str | None:
    """``(a: int, b=1) -> str`` for ``obj``, annotations as written, or None if it has none."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())
    if drop_first and parameters:
        parameters = parameters[1:]
    parameters = [p.replace(annotation=_annotation(p.annotation)) for p in parameters]
    signature = signature.replace(parameters=parameters, return_annotation=_annotation(signature.return_annotation))
    return _ADDRESS.sub("", str(signature))


def _code_block(name: str, signature: str, prefix: str = "") -> list[str]:
    """A signature as a fenced block, one parameter per line when it is long."""
    line = f"{prefix}{name}{signature}"
    if len(line) <= LINE_WIDTH:
        return ["```python", line, "```"]
    head, _, rest = signature.partition("(")
    params, returns = _split_params(rest)
    lines = ["```python", f"{prefix}{name}{head}("]
    lines += [f"    {p}," for p in params]
    lines += [f"){returns}", "```"]
    return lines


def _split_params(text: str) -> tuple[list[str], str]:
    """Split ``a, b=(1, 2)) -> x`` at top-level commas; returns (params, ``) -> x``-tail)."""
    depth, current, params = 0, [], []
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                if "".join(current).strip():
                    params.append("".join(current).strip())
                return params, text[index + 1 :]
            depth -= 1
        if char == "," and depth == 0:
            params.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    return params, ""


def _doc(obj: Any) -> str:
    """The object's own docstring (never inherited), cleaned for Markdown."""
    raw = obj.__doc__ if isinstance(obj.__doc__, str) else ""
    return _markdown(inspect.cleandoc(raw)) if raw.strip() else ""


def _markdown(text: str) -> str:
    text = _ROLE.sub(lambda m: f"``{m.group(1)}``", text)
    # numpydoc "Title\n-----" would become a Markdown heading: make it a bold line instead.
    text = re.sub(r"^(\S[^\n]*)\n-{3,}$", r"**\1**\n", text, flags=re.M)
    return re.sub(r"(\S)::$", r"\1:", text, flags=re.M)


def _attribute_docs(obj: Any) -> dict[str, str]:
    """``{name: doc}`` from ``#:`` comments in ``obj``'s source (trailing, or on the lines above)."""
    try:
        lines = inspect.getsource(obj).splitlines()
    except (OSError, TypeError):
        return {}
    docs: dict[str, str] = {}
    pending: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        match = re.match(r"(?:self\.)?([A-Za-z]\w*)\s*(?::[^=]+)?=[^=].*?(?:#:\s*(.*))?$", stripped)
        if match and (match.group(2) or pending):
            docs.setdefault(match.group(1), " ".join(pending + [match.group(2) or ""]).strip())
        pending = []
    return docs


def _value(value: Any) -> str:
    return _ADDRESS.sub("", repr(value))


def _is_param(value: Any) -> bool:
    """A Spark ML ``Param`` (recognised by shape, so PySpark need not be imported here)."""
    return all(hasattr(value, a) for a in ("name", "doc", "typeConverter"))


class Renderer:
    """Builds the Markdown and the list of documented entries."""

    def __init__(self):
        self.lines: list[str] = []
        self.entries: list[Entry] = []
        self.homes = _homes()  # id(object) -> qualified name where it is documented

    def emit(self, *lines: str) -> None:
        """Append lines of Markdown."""
        self.lines.extend(lines)

    def paragraph(self, text: str) -> None:
        """Append a block of text followed by a blank line (nothing for empty text)."""
        if text:
            self.emit(text, "")

    def record(self, qualname: str, kind: str, doc: str) -> None:
        """Remember a documented object (for the docstring checks)."""
        self.entries.append(Entry(qualname, kind, doc))

    # -- sections --

    def section(self, section: Section) -> None:
        """Render one section: the module's docstring (for whole modules) and its members."""
        module = importlib.import_module(section.module)
        self.emit(f'<a id="{section.module}"></a>', "", f"## {section.title}: `{section.module}`", "")
        self.paragraph(section.intro)
        if section.names is None:
            doc = _doc(module)
            self.record(section.module, "module", doc)
            self.paragraph(doc)
        module_attrs = _attribute_docs(module)
        for name in self.member_names(module, section):
            self.member(module, section.module, name, module_attrs)

    @staticmethod
    def member_names(module: Any, section: Section) -> list[str]:
        """The names a section documents, in a stable order."""
        if section.names is not None:
            return list(section.names)
        if hasattr(module, "__all__"):
            return list(module.__all__)
        defined = [
            (name, obj)
            for name, obj in vars(module).items()
            if not name.startswith("_")
            and (inspect.isclass(obj) or inspect.isfunction(obj))
            and getattr(obj, "__module__", None) == module.__name__
        ]
        return [name for name, obj in sorted(defined, key=lambda item: _source_line(item[1]))]

    def member(self, module: Any, module_name: str, name: str, attribute_docs: dict[str, str]) -> None:
        """Render one module member: a class, a function, a reference to its home, or a value."""
        obj = getattr(module, name)
        qualname = f"{module_name}.{name}"
        home = self.homes.get(id(obj))
        if home is not None and home != qualname and not inspect.ismodule(obj):
            summary = _doc(obj).split("\n\n")[0].replace("\n", " ")
            self.emit(f"- `{qualname}`: see [`{home}`](#{home})" + (f". {summary}" if summary else "."), "")
            self.record(qualname, "alias", home)
        elif inspect.ismodule(obj):
            summary = _doc(obj).split("\n\n")[0].replace("\n", " ")
            self.emit(
                f"- module `{qualname}`: see [{home or qualname}](#{home or qualname})"
                + (f". {summary}" if summary else "."),
                "",
            )
            self.record(qualname, "alias", home or qualname)
        elif inspect.isclass(obj):
            self.klass(qualname, obj)
        elif callable(obj):
            doc = _doc(obj)
            self.emit(f'<a id="{qualname}"></a>', "", f"### `{qualname}`", "")
            self.emit(*_code_block(name, _signature(obj) or "(...)"), "")
            self.record(qualname, "function", doc)
            self.paragraph(doc)
        else:
            doc = attribute_docs.get(name, "")
            self.emit(f"- `{qualname} = {_value(obj)}`" + (f": {doc}" if doc else ""), "")
            self.record(qualname, "data", doc)

    def klass(self, qualname: str, cls: type) -> None:
        """Render a class: heading, constructor signature, docstring, attributes, Params, members."""
        doc = _doc(cls)
        bases = [b for b in cls.__bases__ if b is not object and not b.__name__.startswith("_")]
        base_text = f"({', '.join(_type_name(b) for b in bases)})" if bases else ""
        self.emit(f'<a id="{qualname}"></a>', "", f"### class `{qualname}`{base_text}", "")
        init = _own_init(cls)
        if init is not None and f"{cls.__module__}.{cls.__qualname__}" not in NOT_CONSTRUCTED_BY_USERS:
            signature = (_signature(init, drop_first=True) or "(...)").removesuffix(" -> None")
            self.emit(*_code_block(cls.__name__, signature, prefix="class "), "")
        self.record(qualname, "class", doc)
        self.paragraph(doc)

        sparkdl_classes = [k for k in cls.__mro__ if k.__module__.split(".")[0] == "sparkdl"]
        attribute_docs: dict[str, str] = {}
        for klass in reversed(sparkdl_classes):
            attribute_docs.update(_attribute_docs(klass))
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()

        attributes, params, members = [], [], []
        seen: set[str] = set()
        for klass in sparkdl_classes:
            for name, value in vars(klass).items():
                if name.startswith("_") or name in seen:
                    continue
                seen.add(name)
                if _is_param(value):
                    params.append((name, value))
                elif isinstance(value, (property, staticmethod, classmethod)) or inspect.isfunction(value):
                    members.append((name, value))
                elif name not in fields:
                    attributes.append((name, value))
        for name in attribute_docs:  # documented instance attributes (self.x = ...  #: ...)
            if name not in seen and not name.startswith("_") and name not in fields:
                seen.add(name)
                attributes.append((name, dataclasses.MISSING))

        if attributes:
            self.emit("Attributes:", "")
            for name, value in attributes:
                doc_text = attribute_docs.get(name, "")
                shown = f"`{name}`" if value is dataclasses.MISSING else f"`{name} = {_value(value)}`"
                self.emit(f"- {shown}" + (f": {doc_text}" if doc_text else ""))
                self.record(f"{qualname}.{name}", "attribute", doc_text)
            self.emit("")
        accessors = {name: value for name, value in members if _is_accessor(value)}
        if params:
            self.emit("Params (Spark ML), with their setters and getters:", "")
            for name, value in params:
                key = name.replace("_", "").lower()
                pair = [a for a in accessors if a[3:].lower() == key]
                self.emit(
                    f"- `{name}`"
                    + (f" ({' / '.join(f'`{a}`' for a in sorted(pair, reverse=True))})" if pair else "")
                    + f": {value.doc}"
                )
                self.record(f"{qualname}.{name}", "param", value.doc)
            self.emit("")
        for name, value in accessors.items():
            self.record(f"{qualname}.{name}", "method", _doc(value))
        for name, value in members:
            if name not in accessors:
                self.method(qualname, cls, name, value)

    def method(self, class_qualname: str, cls: type, name: str, raw: Any) -> None:
        """Render a method or property of a class."""
        qualname = f"{class_qualname}.{name}"
        if isinstance(raw, property):
            doc = _doc(raw.fget) if raw.fget else ""
            self.emit(f"#### property `{qualname}`", "")
            self.record(qualname, "property", doc)
            self.paragraph(doc)
            return
        function = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        prefix = (
            "staticmethod " if isinstance(raw, staticmethod) else "classmethod " if isinstance(raw, classmethod) else ""
        )
        doc = _doc(function)
        self.emit(f"#### {prefix}`{qualname}`", "")
        self.emit(*_code_block(name, _signature(function, drop_first=not isinstance(raw, staticmethod)) or "(...)"), "")
        self.record(qualname, "method", doc)
        self.paragraph(doc)

    def render(self) -> str:
        """The whole reference as Markdown text."""
        self.emit(
            "# sparkdl API reference",
            "",
            "Generated from sparkdl's docstrings by `python scripts/gen_api_docs.py`; do not edit by hand "
            "(`tests/test_docs.py` checks that it is current). For the concepts see "
            "[architecture.md](architecture.md); coming from TensorFlowOnSpark, see [migration.md](migration.md).",
            "",
        )
        self.emit("Contents:", "")
        for section in SECTIONS:
            self.emit(f"- [{section.title}: `{section.module}`](#{section.module})")
        self.emit("")
        for section in SECTIONS:
            self.section(section)
        while self.lines and not self.lines[-1]:
            self.lines.pop()
        return "\n".join(self.lines) + "\n"


def _is_accessor(value: Any) -> bool:
    """A ``setX``/``getX`` generated for a Spark ML Param (a function defined inside a factory)."""
    return inspect.isfunction(value) and "<locals>" in value.__qualname__ and value.__name__[:3] in ("set", "get")


def _homes() -> dict[int, str]:
    """Where each class, function and section module is documented: the first section naming it,
    the package section last (it only re-exports)."""
    homes: dict[int, str] = {}
    for section in SECTIONS:
        homes.setdefault(id(importlib.import_module(section.module)), section.module)
    for section in sorted(SECTIONS, key=lambda s: s.module == "sparkdl"):
        module = importlib.import_module(section.module)
        for name in Renderer.member_names(module, section):
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isroutine(obj):
                homes.setdefault(id(obj), f"{section.module}.{name}")
    return homes


def _type_name(cls: type) -> str:
    if cls.__module__ in ("builtins",):
        return cls.__qualname__
    if cls.__module__.split(".")[0] == "sparkdl":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _own_init(cls: type):
    """The ``__init__`` sparkdl wrote for ``cls`` (its own or a sparkdl base's), or None."""
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] != "sparkdl":
            return None
        if "__init__" in vars(klass):
            return vars(klass)["__init__"]
    return None


def _source_line(obj: Any) -> int:
    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return sys.maxsize


def generate() -> tuple[str, list[Entry]]:
    """``(markdown, entries)``: the reference text and every object it documents."""
    renderer = Renderer()
    text = renderer.render()
    return text, renderer.entries


def main(argv: list[str] | None = None) -> int:
    """Write docs/api.md, or with ``--check`` report whether it is current (exit status 1 if not)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if docs/api.md is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT})")
    args = parser.parse_args(argv)
    text, _ = generate()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run `python scripts/gen_api_docs.py`", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # document this checkout, also when sparkdl is not installed
    sys.exit(main())
