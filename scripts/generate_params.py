"""Write sparkdl's Param mixins and the documentation's Params page from the one Params table.

``sparkdl/spark_ml/param_table.py`` defines every Param once (name, doc, converter, default),
the ``HasX`` mixins that hold them and the stages that declare them. This script writes:

- ``sparkdl/spark_ml/shared_params.py``: one ``HasX`` class per mixin (its Params, a setter and a
  getter each) and one ``<Stage>Params`` class per stage (its mixins, its defaults), as source a
  reader, an IDE and mkdocstrings see like hand-written code (PySpark's
  ``_shared_params_code_gen.py`` writes ``pyspark/ml/param/shared.py`` the same way);
- ``docs/params.md``: every Param of every stage, with its default and meaning.

Run it after editing the table, and commit what it writes::

    .venv/bin/python scripts/generate_params.py          # write the files
    .venv/bin/python scripts/generate_params.py --check  # exit 1 if one is stale (what the unit test checks)

The output is already formatted as ``ruff format`` formats it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyspark.ml.param import TypeConverters  # noqa: E402

from sparkdl.spark_ml import param_table as table  # noqa: E402

LINE = 120  # ruff's line length (pyproject.toml)
#: The Python type each of PySpark's converters returns (the getters' annotations).
_PYSPARK_TYPES = {
    TypeConverters.toInt: "int",
    TypeConverters.toFloat: "float",
    TypeConverters.toBoolean: "bool",
    TypeConverters.toString: "str",
    TypeConverters.toListString: "list[str]",
}
_HEADER = '''"""sparkdl's Spark ML Params as classes: a ``HasX`` mixin per Param or group, ``<Stage>Params`` per stage.

DO NOT EDIT: written by ``scripts/generate_params.py`` from :mod:`sparkdl.spark_ml.param_table`,
where each Param is defined once (edit the table, run the script; a unit test fails while this
file is stale).

A mixin holds its Params (TensorFlowOnSpark's snake_case names) with Spark ML's camel-case
accessors: ``HasBatchSize`` gives ``batch_size``, ``setBatchSize(value)`` (returns self) and
``getBatchSize()``. The mixins set no defaults, so a custom stage mixes them in and chooses its
own; ``TFEstimatorParams`` and the other stage classes hold a stage's mixins and set its defaults.
"""
'''


# -- shared_params.py --


def converter_name(converter: Callable) -> str:
    """How the generated source names ``converter``: ``TypeConverters.toInt`` or a name of the table."""
    for name in dir(TypeConverters):
        if getattr(TypeConverters, name) is converter:
            return f"TypeConverters.{name}"
    for name, value in vars(table).items():
        if value is converter and not name.startswith("_"):
            return name
    raise ValueError(f"converter {converter!r} is neither PySpark's nor a public name of param_table")


def value_type(converter: Callable) -> str:
    """The type a Param's getter returns, read from its converter."""
    if converter in _PYSPARK_TYPES:
        return _PYSPARK_TYPES[converter]
    inner = getattr(converter, "__wrapped__", None)
    if inner is not None:  # table.optional(inner)
        kind = value_type(inner)
        return kind if kind == "Any" or "None" in kind else f"{kind} | None"
    return str(converter.__annotations__.get("return", "Any"))


def literal(value: Any) -> str:
    """``value`` as Python source, with ruff's double quotes."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


def _chunks(text: str, width: int) -> list[str]:
    """``text`` cut at spaces into pieces of at most ``width`` characters (each but the last ends with its space)."""
    pieces, words = [], []
    for word in text.split(" "):
        if words and len(" ".join([*words, word])) + 1 > width:
            pieces.append(" ".join(words) + " ")
            words = []
        words.append(word)
    return [*pieces, " ".join(words)]


def _string_lines(text: str, indent: int) -> list[str]:
    """``text`` as one string argument (with its trailing comma), split into implicitly joined parts if long."""
    pad = " " * indent
    if len(pad) + len(literal(text)) + 1 <= LINE:
        return [f"{pad}{literal(text)},"]
    parts = _chunks(text, LINE - indent - 3)
    return [f"{pad}{literal(part)}" for part in parts[:-1]] + [f"{pad}{literal(parts[-1])},"]


def _docstring(text: str, indent: int) -> list[str]:
    """``text`` as a docstring, wrapped at the line length (room left on every line for the closing quotes)."""
    pad = " " * indent
    lines = [f"{pad}{piece.rstrip(' ')}" for piece in _chunks(text, LINE - indent - 6)]
    lines[0] = lines[0].replace(pad, f'{pad}"""', 1)
    lines[-1] += '"""'
    return lines


def _mixin_doc(mixin: table.MixinSpec, params: dict[str, table.ParamSpec]) -> str:
    if mixin.doc:
        return mixin.doc
    (name,) = mixin.params
    return f"Mixin for Param ``{name}``: {params[name].doc}."


def render_mixin(mixin: table.MixinSpec, params: dict[str, table.ParamSpec]) -> list[str]:
    """A ``HasX`` class: its Params, then a setter and a getter per Param."""
    out = [f"class {mixin.name}(Params):", *_docstring(_mixin_doc(mixin, params), 4), ""]
    for name in mixin.params:
        spec = params[name]
        out += [
            f"    {name}: Param[{value_type(spec.converter)}] = Param(",
            "        Params._dummy(),",
            f"        {literal(name)},",
            *_string_lines(spec.doc, 8),
            f"        typeConverter={converter_name(spec.converter)},",
            "    )",
        ]
    for name in mixin.params:
        spec = params[name]
        out += [
            "",
            f"    def set{spec.camel}(self, value):",
            f'        """Set ``{name}``. Returns self."""',
            f"        return self._set({name}=value)",
            "",
            f"    def get{spec.camel}(self) -> {value_type(spec.converter)}:",
            f'        """The value of ``{name}``."""',
            f"        return self.getOrDefault(self.{name})",
        ]
    return out


def stage_defaults(stage: table.StageSpec) -> dict[str, Any]:
    """Every Param of ``stage`` that has a default, with the default the stage gives it."""
    params = {p.name: p for p in table.PARAMS}
    mixins = {m.name: m for m in table.MIXINS}
    defaults = {}
    for mixin in stage.mixins:
        for name in mixins[mixin].params:
            default = stage.defaults.get(name, params[name].default)
            if default is not table.NO_DEFAULT:
                defaults[name] = default
    return defaults


def render_stage(stage: table.StageSpec) -> list[str]:
    """A ``<Stage>Params`` class: the stage's mixins, and its defaults set when it is made."""
    return [
        f"class {stage.name}Params(",
        *(f"    {mixin}," for mixin in stage.mixins),
        "):",
        f'    """The Params of :class:`{stage.import_path}.{stage.name}`, with its defaults."""',
        "",
        "    def __init__(self) -> None:",
        "        super().__init__()",
        "        self._setDefault(",
        *(f"            {name}={literal(value)}," for name, value in sorted(stage_defaults(stage).items())),
        "        )",
    ]


def render_shared_params() -> str:
    """The source of ``sparkdl/spark_ml/shared_params.py``."""
    params = {p.name: p for p in table.PARAMS}
    blocks = [render_mixin(mixin, params) for mixin in table.MIXINS]
    blocks += [render_stage(stage) for stage in table.STAGES]
    body = "\n\n\n".join("\n".join(block) for block in blocks)
    names = sorted(
        {converter_name(p.converter) for p in table.PARAMS} - {f"TypeConverters.{n}" for n in dir(TypeConverters)}
    )
    imports = ["from __future__ import annotations", ""]
    if any("Any" in value_type(p.converter) for p in table.PARAMS):
        imports += ["from typing import Any", ""]
    imports += ["from pyspark.ml.param import Param, Params, TypeConverters", ""]
    single = f"from .param_table import {', '.join(names)}"
    imports += [single] if len(single) <= LINE else ["from .param_table import (", *(f"    {n}," for n in names), ")"]
    exported = [m.name for m in table.MIXINS] + [f"{s.name}Params" for s in table.STAGES]
    footer = ["__all__ = [", *(f"    {literal(name)}," for name in exported), "]"]
    return "\n".join([_HEADER, *imports, "", "", body, "", "", *footer]) + "\n"


# -- docs/params.md --

_PAGE_HEADER = """# Params of every stage

<!-- DO NOT EDIT: written by scripts/generate_params.py from sparkdl/spark_ml/param_table.py. -->

Every Spark ML Param of sparkdl's stages, with its default. A Param is given as a keyword
(`KerasEstimator(epochs=5)`, `TFEstimator(train_fn, tf_args, batch_size=64)`), set with its setter
(`setEpochs(5)`, which returns the stage) or varied by a param map
(`ParamGridBuilder().addGrid(estimator.learning_rate, [0.01, 0.001])`); its getter reads the value
or the default. Each Param is defined once, in `sparkdl/spark_ml/param_table.py`, whichever stages
declare it; the `Has*` mixins of [`sparkdl.params`](api.md#spark-ml-params-tensorflowonsparks-mixins-sparkdlparams)
are made from the same table.
"""


def _text(text: str) -> str:
    """Plain text as Markdown (in a table's cell): the characters Markdown would read escaped."""
    for char in "\\`*_|":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;")


def render_params_page() -> str:
    """The Markdown of ``docs/params.md``: a table of Params per stage."""
    params = {p.name: p for p in table.PARAMS}
    mixins = {m.name: m for m in table.MIXINS}
    out = [_PAGE_HEADER]
    for stage in table.STAGES:
        defaults = stage_defaults(stage)
        names = sorted(name for mixin in stage.mixins for name in mixins[mixin].params)
        out += [
            f"## {stage.name}",
            "",
            f"`from {stage.import_path} import {stage.name}`: {_text(stage.summary)}",
            "",
            "| Param | Default | Setter / getter | Meaning |",
            "|---|---|---|---|",
        ]
        for name in names:
            spec = params[name]
            default = f"`{literal(defaults[name])}`" if name in defaults else "(none)"
            accessors = f"`set{spec.camel}` / `get{spec.camel}`"
            out.append(f"| `{name}` | {default} | {accessors} | {_text(spec.doc)} |")
        out.append("")
    return "\n".join(out)


#: Each generated file (from the repository's root) and what writes it.
TARGETS: dict[str, Callable[[], str]] = {
    "sparkdl/spark_ml/shared_params.py": render_shared_params,
    "docs/params.md": render_params_page,
}


def stale() -> list[str]:
    """The generated files whose content differs from what the table makes now."""
    return [path for path, render in TARGETS.items() if _read(ROOT / path) != render()]


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale; write nothing")
    args = parser.parse_args(argv)
    if args.check:
        behind = stale()
        for path in behind:
            print(f"{path} is stale: run .venv/bin/python scripts/generate_params.py", file=sys.stderr)
        return 1 if behind else 0
    for path, render in TARGETS.items():
        (ROOT / path).write_text(render(), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
