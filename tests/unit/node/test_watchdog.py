"""Process-lifetime helpers: pid_alive, watch_pid and die_with_parent (Linux)."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from sparkdl.node.watchdog import pid_alive, watch_pid

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process semantics"),
]


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


@pytest.fixture
def sleeper():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield child
    child.kill()
    child.wait(timeout=10)


def test_own_pid_is_alive():
    assert pid_alive(os.getpid())


def test_running_child_is_alive(sleeper):
    assert pid_alive(sleeper.pid)


def test_reaped_child_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    assert not pid_alive(child.pid)


def test_zombie_child_counts_as_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # blocks until it exits, does not reap
        with open(f"/proc/{child.pid}/stat", "rb") as stat:
            assert b") Z" in stat.read()  # really a zombie: kill(pid, 0) alone would still succeed
        assert not pid_alive(child.pid)
    finally:
        child.wait(timeout=30)


def test_watch_pid_calls_back_when_the_child_ends():
    gone = threading.Event()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    watch_pid(child.pid, gone.set, interval_s=0.05)
    assert not gone.is_set()
    child.stdin.close()  # let it end
    child.wait(timeout=30)
    assert gone.wait(5)


def test_watch_pid_stops_when_asked(sleeper):
    calls = []
    stop = watch_pid(sleeper.pid, lambda: calls.append(1), interval_s=0.05)
    threads = [t for t in threading.enumerate() if t.name == f"watch-pid-{sleeper.pid}"]
    assert len(threads) == 1 and threads[0].daemon
    stop.set()
    threads[0].join(timeout=5)
    assert not threads[0].is_alive()
    assert calls == []


GRANDCHILD = """
import os, sys, time
from sparkdl.node import watchdog
watchdog.die_with_parent()
path = sys.argv[1]
with open(path + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(path + ".tmp", path)
print(os.getpid(), flush=True)
time.sleep(120)
"""

CHILD = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
time.sleep(120)
"""


def test_grandchild_dies_with_its_parent(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), GRANDCHILD, str(pid_file)], stdout=subprocess.PIPE, text=True
    )
    grandchild = None
    try:
        line = child.stdout.readline()  # the grandchild prints its pid once die_with_parent() has run
        grandchild = int(pid_file.read_text())
        assert int(line) == grandchild != child.pid
        assert pid_alive(grandchild)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert wait_until(lambda: not pid_alive(grandchild), timeout=10)
    finally:
        child.kill()
        child.wait(timeout=10)
        child.stdout.close()
        if grandchild is not None and pid_alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_die_with_parent_is_harmless_in_a_process_whose_parent_lives():
    result = subprocess.run(
        [sys.executable, "-c", "from sparkdl.node import watchdog; watchdog.die_with_parent(); print('ok')"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok"
