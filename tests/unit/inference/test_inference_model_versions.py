"""Versioned model directories (sparkdl.model_versions), without Spark or TensorFlow: publishing is
atomic, the newest complete version wins, and what cannot work is refused. (Scoring that switches to
a newer version without a restart: tests/cluster/inference/test_model_refresh.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdl.inference import ModelVersions, Predictor
from sparkdl.model_versions import ModelVersionError, newest_version, publish_version, version_model_path


def _keras_file(directory: str) -> None:
    Path(directory, "model.keras").write_bytes(b"PK not really a model")  # only names matter here


def _saved_model(directory: str) -> None:
    Path(directory, "saved_model.pb").write_bytes(b"")
    Path(directory, "variables").mkdir()


def _leftovers(base: Path) -> list[str]:
    return sorted(p.name for p in base.iterdir() if p.name.startswith("."))


@pytest.mark.timeout(30)
def test_publish_is_atomic_and_the_newest_complete_version_wins(tmp_path):
    base = tmp_path / "models"
    assert newest_version(base) is None  # no base yet
    seen_while_writing = []

    def write(directory):
        seen_while_writing.append((Path(directory).parent == base, newest_version(base)))
        _keras_file(directory)

    path = publish_version(base, 1, write)
    assert seen_while_writing == [(True, None)]  # written beside the versions, invisible meanwhile
    assert path == str(base / "1" / "model.keras") and newest_version(base) == (1, path)

    # Junk a reader must ignore: a temporary directory (a crashed publisher), names that are not
    # plain version numbers, a file named like a version.
    for name in (".tmp-99-dead", "latest", "007", "3a"):
        (base / name).mkdir()
        _keras_file(str(base / name))
    (base / "8").write_text("not a directory")
    assert newest_version(base) == (1, path)

    publish_version(base, 2, _keras_file)
    saved = publish_version(base, 10, _saved_model)  # numbers, not names, are compared
    assert saved == str(base / "10") and newest_version(base) == (10, saved)


@pytest.mark.timeout(30)
def test_a_version_is_published_once_and_failed_writes_leave_nothing(tmp_path):
    base = tmp_path / "models"
    publish_version(base, 3, _keras_file)
    calls = []
    with pytest.raises(FileExistsError, match="versions are immutable"):
        publish_version(base, 3, calls.append)
    assert calls == []  # refused before writing anything

    def failing(directory):
        _keras_file(directory)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        publish_version(base, 4, failing)
    with pytest.raises(ModelVersionError, match="no saved_model.pb and no Keras file"):
        publish_version(base, 5, lambda directory: None)  # wrote no model
    assert _leftovers(base) == [] and newest_version(base) == (3, str(base / "3" / "model.keras"))

    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.keras", "b.h5"):
        (two / name).write_bytes(b"")
    with pytest.raises(ModelVersionError, match=r"Keras files \['a.keras', 'b.h5'\]"):
        version_model_path(str(two))
    with pytest.raises(ValueError, match="version must be an integer"):
        publish_version(base, "6", _keras_file)
    with pytest.raises(ValueError, match="refresh_seconds"):
        ModelVersions(str(base), refresh_seconds=-1)
    assert ModelVersions("hdfs://namenode/models/").base == "hdfs://namenode/models"  # any store (see below)
    with pytest.raises(ModelVersionError, match="cannot hold model versions.*ftp://"):
        ModelVersions("ftp://host/models")
    with pytest.raises(ValueError, match="version_column .* needs a versioned model"):
        Predictor(str(base / "3" / "model.keras"), input_mapping="x", version_column="model_version")
