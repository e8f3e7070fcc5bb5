"""A ChannelServer survives what a peer without the secret (or a careless one with it) can throw
at it: a connection flood that exhausts its descriptors, floods of rejections in the log,
oversized control messages, and more channels than it should hold."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from sparkdl import channel as ch
from sparkdl.channel import ChannelError, ChannelServer, connect, new_secret

pytestmark = pytest.mark.timeout(120)

# Runs in its own process: the open-file limit is per process.
FLOOD = r"""
import logging, resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
from sparkdl.channel import ChannelServer, connect, new_secret

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
log = logging.getLogger("sparkdl.channel")
log.addHandler(Keep())
log.setLevel(logging.WARNING)

secret = new_secret()
def answer(channel):
    channel.send({"echo": channel.recv(timeout=10)})
server = ChannelServer(secret, answer)
flood = []
for _ in range(80):  # silent connections, never a handshake
    try:
        flood.append(socket.create_connection(server.address, timeout=2))
    except OSError:
        pass
deadline = time.monotonic() + 20
while not any("Too many open files" in line for line in lines):  # the server ran out of descriptors
    assert time.monotonic() < deadline, ("the flood never exhausted the server", lines)
    time.sleep(0.05)
for sock in flood:
    sock.close()
answered = None
deadline = time.monotonic() + 30
while answered is None and time.monotonic() < deadline:  # bounded retries while descriptors free up
    try:
        with connect(server.address, secret, timeout=5) as client:
            client.send({"x": 1})
            answered = client.recv(timeout=5)
    except Exception:
        time.sleep(0.1)
print("ANSWER", answered, "FLOOD", len(flood), "WARNINGS", len(lines))
"""


def test_a_descriptor_exhausting_flood_does_not_stop_the_server(tmp_path):
    run = subprocess.run([sys.executable, "-c", FLOOD], capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout.split()
    assert out[out.index("ANSWER") + 1:out.index("FLOOD")] == ["{'echo':", "{'x':", "1}}"], run.stdout
    # One line for the first refusal, then summaries at most every REJECTION_LOG_S: not one per connection.
    assert int(out[out.index("WARNINGS") + 1]) <= 4, run.stdout


@pytest.fixture
def server():
    secret = new_secret()
    errors, release = [], threading.Event()

    def hold(channel):
        try:
            channel.send({"echo": channel.recv(timeout=10)})
            release.wait(10)
        except ChannelError as exc:
            errors.append(exc)
            raise

    srv = ChannelServer(secret, hold)
    yield srv, secret, errors
    release.set()
    srv.close()


def test_a_json_frame_over_its_limit_is_refused_unread(server):
    srv, secret, errors = server
    with connect(srv.address, secret, timeout=5) as client:
        # The server refuses the frame after its header and drops the channel: the rest of the send
        # may already fail (connection reset), else the reply never comes.
        with pytest.raises(OSError):  # ChannelError is one too
            client.send({"blob": "x" * (ch.MAX_JSON_BYTES + 10)})
            client.recv(timeout=5)
    deadline = time.monotonic() + 5
    while not errors:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert "JSON frame of" in str(errors[0]) and "exceeds" in str(errors[0])


def test_channels_beyond_the_cap_are_refused(server, monkeypatch):
    monkeypatch.setattr(ch, "MAX_CHANNELS", 2)
    srv, secret, _ = server
    kept = [connect(srv.address, secret, timeout=5) for _ in range(2)]
    for client in kept:
        client.send({"n": 1})
        assert client.recv(timeout=5) == {"echo": {"n": 1}}
    with connect(srv.address, secret, timeout=5) as extra:
        with pytest.raises(OSError):  # closed by the server: the send or the receive fails
            extra.send({"n": 3})
            extra.recv(timeout=5)
    deadline = time.monotonic() + 5
    while srv.rejected < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    for client in kept:
        client.close()
