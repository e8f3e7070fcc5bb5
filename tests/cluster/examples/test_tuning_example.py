"""The Optuna example (``examples/tuning/digits_optuna.py``) on the suite's shared 2-executor Spark, at
its smallest: four trials of three epochs, pruning on; it prints the trials table and writes its plot."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytest.importorskip("optuna")
pytestmark = [pytest.mark.timeout(600), pytest.mark.cluster]


@pytest.fixture
def spark2(sc2, spark_holder):
    return spark_holder.spark


def test_the_tuning_example_runs_its_study_prints_the_trials_and_plots_them(spark2, tmp_path, capsys):
    from pyspark import cloudpickle

    path = ROOT / "examples" / "tuning" / "digits_optuna.py"
    spec = importlib.util.spec_from_file_location("example_digits_optuna", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    argv = ["--trials", "4", "--epochs", "3", "--work_dir", str(tmp_path)]
    study = module.main(argv, spark=spark2)
    stdout = capsys.readouterr().out
    assert re.search(r"4 trials in [0-9.]+ s \((\d) complete, (\d) pruned\)", stdout), stdout
    assert "params_learning_rate" in stdout and "params_batch_size" in stdout  # the trials table
    assert len(study.trials) == 4 and study.best_value < 1.0
    assert (tmp_path / "val_loss_per_epoch.png").stat().st_size > 1000 and (tmp_path / "study.db").is_file()
