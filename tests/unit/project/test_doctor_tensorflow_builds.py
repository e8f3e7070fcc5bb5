"""``python -m sparkdl`` reports two TensorFlow builds installed side by side (e.g. tensorflow beside
tensorflow-cpu): they unpack into one ``tensorflow`` folder. Fake distributions in the report's
working directory, which is first on its ``sys.path``, stand in for installed ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doctor_report import run_doctor

pytestmark = pytest.mark.timeout(180)


def _fake_distribution(where: Path, name: str, files: list[str]) -> None:
    info = where / f"{name.replace('-', '_')}-2.21.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 2.21.0\n")
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in [*files, f"{info.name}/METADATA"]))


def test_two_tensorflow_builds_are_a_problem_with_its_fix(tmp_path):
    _fake_distribution(tmp_path, "tensorflow-cpu", ["tensorflow/__init__.py"])
    _fake_distribution(tmp_path, "tensorflow", ["tensorflow/__init__.py", "tensorflow/python/__init__.py"])
    report = run_doctor(tmp_path=tmp_path)
    assert re.search(r"^tensorflow:\s+tensorflow 2\.21\.0, tensorflow-cpu 2\.21\.0$", report, re.M), report
    assert re.search(
        r"^note: 2 TensorFlow builds are installed \(tensorflow 2\.21\.0, tensorflow-cpu 2\.21\.0\): .*"
        r"pip uninstall -y tensorflow tensorflow-cpu, then reinstall the one you want",
        report,
        re.M,
    ), report


def test_a_shim_that_pulls_in_the_build_is_not_a_second_build(tmp_path):
    """E.g. tensorflow on some platforms: no files of its own, a dependency on the real build."""
    _fake_distribution(tmp_path, "tensorflow-cpu", ["tensorflow/__init__.py"])
    _fake_distribution(tmp_path, "tensorflow", [])
    report = run_doctor(tmp_path=tmp_path)
    assert re.search(r"^tensorflow:\s+tensorflow 2\.21\.0, tensorflow-cpu 2\.21\.0$", report, re.M), report
    assert "TensorFlow builds are installed" not in report, report
