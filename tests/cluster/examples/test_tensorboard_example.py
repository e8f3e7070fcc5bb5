"""The driver's TensorBoard (``cluster.start_tensorboard()``): the example's scalars show while the
nodes train and after ``shutdown()``, until ``stop_tensorboard()``; and it ends with the driver."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import psutil
import pytest
from cluster_watch import wait_for

from sparkdl.node.watchdog import pid_alive

import example_functions
import tensorboard_functions

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.timeout(600), pytest.mark.cluster]


def _example(script: str):
    return example_functions.load_example(script)


def _tags(url: str) -> dict:
    with urllib.request.urlopen(f"{url}data/plugin/scalars/tags", timeout=10) as answer:
        return json.load(answer)


def _tensorboards(log_dir: Path) -> list[psutil.Process]:
    """This process's TensorBoard children reading ``log_dir`` (other children, such as one that
    ended and is not reaped yet, are passed over)."""
    boards = []
    for child in psutil.Process().children():
        try:
            command = child.cmdline()
        except psutil.Error:  # a zombie, or gone meanwhile: not a TensorBoard that serves
            continue
        if "sparkdl.driver.tensorboard" in command and str(log_dir) in command:
            boards.append(child)
    return boards


@pytest.fixture
def spark2(sc2, spark_holder):
    return spark_holder.spark


def test_the_example_shows_its_scalars_while_the_nodes_train_and_after_shutdown(spark2, tmp_path, capsys):
    """The example, its chief held at the end of epoch 1 (``tensorboard_functions``) while the driver
    and the test look: TensorBoard lists the epoch's scalars then, all three epochs after
    ``shutdown()``, and its process ends with ``stop_tensorboard()``."""
    flags, log_dir = tmp_path / "flags", tmp_path / "logs"
    flags.mkdir()
    example = _example("examples/tensorboard/train_with_tensorboard.py")
    example.summary_callbacks = functools.partial(
        tensorboard_functions.hold_after_first_epoch, example.summary_callbacks, str(flags)
    )
    wait_for_scalars, looked = example.wait_for_scalars, {}

    def look_while_held(url, epochs, timeout):
        try:
            shown = wait_for_scalars(url, epochs, timeout)
            if not looked:
                held = (flags / tensorboard_functions.HELD).exists() and not (flags / tensorboard_functions.GO).exists()
                looked.update(held=held, tags=_tags(url))
            return shown
        finally:
            (flags / tensorboard_functions.GO).touch()

    example.wait_for_scalars = look_while_held
    cluster = example.main(["--epochs", "3", "--log_dir", str(log_dir), "--wait", "120"], spark=spark2)
    try:
        stdout = capsys.readouterr().out
        assert looked["held"], "the first look came while the chief's fit was held after epoch 1"
        assert {"epoch_loss", "epoch_accuracy"} <= set(looked["tags"]["train"]), looked
        url = cluster.start_tensorboard()  # the running one: same arguments
        assert url.startswith("http://127.0.0.1:") and f"TensorBoard: {url} (log dir {log_dir})" in stdout, stdout
        assert "TensorBoard shows 1 of 3 epochs of {'train': ['epoch_accuracy', 'epoch_loss']}" in stdout, stdout
        assert "after shutdown(), TensorBoard shows 3 epochs" in stdout, stdout
        assert cluster.state.value == "stopped"
        assert [step for step, _ in example.losses(url)] == [1, 2, 3]
        (board,) = _tensorboards(log_dir)
    finally:
        cluster.stop_tensorboard()
    assert not pid_alive(board.pid)
    with pytest.raises(OSError):
        _tags(url)


DRIVER = textwrap.dedent(
    """
    import sys, threading
    from sparkdl.driver.tensorboard import DriverTensorBoard

    started = []  # from a thread that then ends, as a notebook's or a caller's may
    starter = threading.Thread(target=lambda: started.append(DriverTensorBoard.start(sys.argv[1])))
    starter.start()
    starter.join()
    print(started[0].pid, started[0].url, flush=True)
    sys.stdin.read()  # until the test kills this process
    """
)


def test_the_drivers_tensorboard_outlives_the_thread_that_started_it_and_dies_with_the_driver(tmp_path):
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "logs")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        pid, url = driver.stdout.readline().split()
        assert _tags(url) == {}, "TensorBoard serves after the thread that started it ended"
    finally:
        driver.kill()
        driver.wait()
    wait_for(lambda: not pid_alive(int(pid)), 10, "TensorBoard to end with the driver process")
