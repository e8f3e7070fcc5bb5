"""sparkdl/spark_ml/shared_params.py and docs/params.md: written from the Params table, and current.

``scripts/generate_params.py`` writes both; a change to the table that is not regenerated fails
here, as PySpark checks its generated ``shared.py``.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.ml.param import Params

from sparkdl.spark_ml import param_table as table
from sparkdl.spark_ml import shared_params

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import generate_params  # noqa: E402

pytestmark = pytest.mark.timeout(30)


def test_the_generated_files_are_current():
    assert generate_params.stale() == [], "run: .venv/bin/python scripts/generate_params.py"


def test_a_change_to_the_table_makes_both_files_stale(monkeypatch):
    changed = tuple(replace(p, doc=p.doc + " (changed)") if p.name == "epochs" else p for p in table.PARAMS)
    monkeypatch.setattr(table, "PARAMS", changed)
    assert sorted(generate_params.stale()) == ["docs/params.md", "sparkdl/spark_ml/shared_params.py"]
    assert generate_params.main(["--check"]) == 1


def test_every_mixin_holds_its_params_with_accessors_and_no_default():
    for mixin in table.MIXINS:
        cls = getattr(shared_params, mixin.name)
        assert issubclass(cls, Params) and cls.__doc__, mixin.name
        instance = cls()
        assert sorted(p.name for p in instance.params) == sorted(mixin.params), mixin.name
        for name in mixin.params:
            spec = next(p for p in table.PARAMS if p.name == name)
            assert not instance.hasDefault(name), f"{mixin.name} sets a default: a custom stage chooses its own"
            assert callable(getattr(cls, f"set{spec.camel}")) and callable(getattr(cls, f"get{spec.camel}"))
    assert set(shared_params.__all__) == {m.name for m in table.MIXINS} | {f"{s.name}Params" for s in table.STAGES}


def test_the_params_page_lists_every_param_of_every_stage_with_its_default():
    page = (ROOT / "docs" / "params.md").read_text(encoding="utf-8")
    sections = dict(part.split("\n", 1) for part in page.split("\n## ")[1:])
    assert sorted(sections) == sorted(stage.name for stage in table.STAGES)
    mixins = {m.name: m for m in table.MIXINS}
    for stage in table.STAGES:
        rows = [line for line in sections[stage.name].splitlines() if line.startswith("| `")]
        names = sorted(name for mixin in stage.mixins for name in mixins[mixin].params)
        assert [row.split("`")[1] for row in rows] == names, stage.name
    keras_batch = next(r for r in sections["KerasEstimator"].splitlines() if r.startswith("| `batch_size`"))
    assert "| `32` |" in keras_batch and "EACH worker" in keras_batch


def test_generated_source_names_converters_and_values_as_python_reads_them():
    assert generate_params.converter_name(table.optional_int) == "optional_int"
    assert generate_params.converter_name(table.PARAMS[0].converter) == "to_dict"
    assert generate_params.value_type(table.optional_int) == "int | None"
    assert generate_params.value_type(table.optional_as_is) == "Any"
    assert generate_params.literal("chief") == '"chief"' and generate_params.literal({}) == "{}"
    with pytest.raises(ValueError, match="neither PySpark's nor a public name"):
        generate_params.converter_name(lambda value: value)
