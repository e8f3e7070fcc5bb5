"""README.md is a lobby whose code runs: the extraction of its runnable blocks, their convention,
and the quickstart shown in three places from one file.

``tests/cluster/examples/test_readme.py`` runs the blocks; this checks, without running anything,
what it will run: a ```` ```python ```` fence runs, ```` ```python no-run ```` and other languages
do not (``readme_blocks.py``), every runnable block is a whole Python program, and the README's
quickstart block and the docs site's home are ``examples/quickstart.py``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from readme_blocks import code_blocks, runnable_blocks, runner_program

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
QUICKSTART = (ROOT / "examples" / "quickstart.py").read_text()

SAMPLE = """# Title

```python
print("runs")
```

```python no-run
fragment(...)
```

````python
print("a four-backtick fence runs too")
```
not a fence's end
````

```bash
echo never
```

```
plain text
```
"""


def test_blocks_are_found_with_their_info_string_and_line():
    blocks = code_blocks(SAMPLE)
    assert [(block.info, block.line) for block in blocks] == [
        ("python", 3),
        ("python no-run", 7),
        ("python", 11),
        ("bash", 17),
        ("", 21),
    ]
    assert blocks[0].code == 'print("runs")\n'
    assert blocks[2].code == 'print("a four-backtick fence runs too")\n```\nnot a fence\'s end\n'


def test_only_plain_python_fences_claim_to_run():
    assert [block.line for block in runnable_blocks(SAMPLE)] == [3, 11]


def test_the_runner_program_runs_each_block_as_its_own_main_program():
    program = runner_program(runnable_blocks(SAMPLE))
    ast.parse(program)
    namespace: dict = {}
    exec(compile(program.split("\nimport sys", 1)[0], "runner", "exec"), namespace)
    assert namespace["BLOCKS"] == [(3, 'print("runs")\n'), (11, runnable_blocks(SAMPLE)[1].code)]
    assert '{"__name__": "__main__"}' in program


def test_the_readme_is_a_lobby():
    lines = README.count("\n")
    assert lines < 150, f"README.md has {lines} lines: move details to docs/ (contributing.md, guide.md)"
    assert "not on PyPI yet" in README
    assert "pip install -e '.[cpu,examples]'" in README and "python -m build" in README
    assert re.search(r"^spark-submit ", README, re.M), "the README shows a spark-submit command"


def _project() -> dict:
    """pyproject.toml's ``[project]`` table."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(ROOT / "pyproject.toml", "rb") as pyproject:
        return tomllib.load(pyproject)["project"]


def test_the_readme_names_every_extra():
    sentence = re.search(r"^Extras: (.*?)\n\n", README, re.M | re.S)
    assert sentence, "README.md has no 'Extras: ...' paragraph"
    named = set(re.findall(r"`([\w-]+)`", sentence.group(1)))  # not `tensorflow[and-cuda]`
    assert named == set(_project()["optional-dependencies"]), sentence.group(1)


def test_the_readme_install_line_installs_what_its_code_imports():
    """The README's ``pip install -e '.[...]'`` brings every module its runnable blocks import
    (found by the distribution that installed it here, e.g. sklearn: scikit-learn)."""
    project = _project()
    extras = re.search(r"^pip install -e '\.\[([\w,-]+)\]'", README, re.M).group(1).split(",")
    requirements = project["dependencies"] + [r for extra in extras for r in project["optional-dependencies"][extra]]
    installed = {canonicalize_name(Requirement(r).name) for r in requirements}
    modules = set()
    for block in runnable_blocks(README):
        for node in ast.walk(ast.parse(block.code)):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    modules -= set(sys.stdlib_module_names) | {"sparkdl"}
    assert {"sklearn", "keras", "tensorflow", "pyspark"} <= modules, modules
    providers = importlib.metadata.packages_distributions()
    missing = {
        m: providers.get(m) for m in modules if not installed & {canonicalize_name(d) for d in providers.get(m, [])}
    }
    assert not missing, f"modules the README imports that pip install -e '.[{','.join(extras)}]' does not: {missing}"


def test_every_runnable_readme_block_is_a_whole_python_program():
    blocks = runnable_blocks(README)
    assert len(blocks) >= 5, "the quickstart and the four main uses"
    for block in blocks:
        tree = ast.parse(block.code, filename=f"README.md:{block.line}")
        assert "SparkSession" in block.code, f"README.md:{block.line} starts no Spark: mark a fragment `python no-run`"
        assert isinstance(tree.body[0], (ast.Import, ast.ImportFrom)), f"README.md:{block.line} begins with its imports"


def test_the_spark_submit_line_names_options_the_example_has():
    command = re.search(r"^spark-submit .*?(?=^```)", README, re.M | re.S).group(0)
    script = re.search(r"(examples/\S+\.py) (.*)$", command, re.M)
    assert (ROOT / script.group(1)).exists(), script.group(1)
    source = (ROOT / script.group(1)).read_text() + (ROOT / "examples/mnist/digits_common.py").read_text()
    for option in re.findall(r"(--\w+)", script.group(2)):
        assert f'"{option}"' in source, f"{script.group(1)} has no {option}"


def test_the_quickstart_is_one_file_shown_in_the_readme_and_on_the_docs_home():
    assert QUICKSTART in [block.code for block in runnable_blocks(README)], (
        "README.md's quickstart block differs from examples/quickstart.py: paste the file into it"
    )
    home = (ROOT / "docs" / "index.md").read_text()
    assert re.search(r'^```python\n--8<-- "examples/quickstart\.py"\n```$', home, re.M), "docs/index.md includes it"
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert "pymdownx.snippets" in mkdocs and "check_paths: true" in mkdocs
