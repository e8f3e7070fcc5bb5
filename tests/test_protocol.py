"""The message definitions of sparkdl/protocol.py: every message survives its wire form, and
anything a peer could send wrong is refused with a ProtocolError naming the problem."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sparkdl import protocol

#: One instance of every message type, with its fields set (optional ones included).
EXAMPLES = [
    protocol.Register(node_number=1, host="10.0.0.2", port=2222, pid=7, anchor_pid=6, gpus="0", log_path="/x"),
    protocol.Started(pid=8),
    protocol.TensorBoard(url="http://10.0.0.2:6006"),
    protocol.NodeWarning("TensorBoard did not start"),
    protocol.Log(["line 1", "line 2"]),
    protocol.Exited(exit_code=None, signal="SIGKILL", stopped=False, failed=True, cause="stalled", stalled=True),
    protocol.Progress({"step": 3, "loss": 0.5, "epoch_end": True}),
    protocol.Serving(),
    protocol.FeedReady(port=4000),
    protocol.FeedTerminated(),
    protocol.FeedConsumed(qname="input", session=2, rows_read=10, rows_received=12),
    protocol.Inferred(run="r", stage=3, partition=None, rows=5),
    protocol.ClusterSpec({"worker": ["h:1", "h:2"]}),
    protocol.Abort("too late"),
    protocol.Stop(grace_s=5.0),
    protocol.Stall("made no progress"),
    protocol.Plan(session=1, epochs=3, rows_per_epoch=100, cache=True, cache_max_bytes=1 << 20, seed=9, timeout=60.0),
    protocol.Train(session=1, partition=2, epoch=1, split="validation", timeout=30.0),
    protocol.Infer(partition=4, run="r", stage=2),
    protocol.CacheSeal(session=1),
    protocol.CacheUse(session=1, use=True),
    protocol.End(qname="other"),
    protocol.Done(rows=5),
    protocol.Ack(rows=5),
    protocol.CacheStatus(problem=None),
    protocol.Terminated(),
    protocol.Rejected("column 'x' differs"),
    protocol.Dropped("sent nothing for 10 s"),
    protocol.Complete(rows=5),
]


def test_every_message_type_has_an_example_and_a_unique_tag():
    assert {type(m) for m in EXAMPLES} == set(protocol.MESSAGES.values())
    assert len(protocol.MESSAGES) == len(EXAMPLES)


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: m.TYPE)
def test_a_message_survives_its_json_wire_form(message):
    data = json.loads(json.dumps(message.wire()))
    assert data["type"] == message.TYPE
    assert protocol.parse(data) == message
    assert protocol.parse(data, type(message)) == message


def test_optional_fields_left_unset_stay_off_the_wire_and_required_ones_stay_on():
    assert protocol.Ack().wire() == {"type": "ack"}
    assert protocol.CacheStatus(None).wire() == {"type": "cache_status", "problem": None}


@pytest.mark.parametrize(
    "data, problem",
    [
        ([1, 2], "expected a message, got list"),
        ({"rows": 1}, "unknown message type None"),
        ({"type": "reboot"}, "unknown message type 'reboot'"),
        ({"type": "started"}, "field 'pid' is missing"),
        ({"type": "started", "pid": "7"}, "field 'pid' must be int"),
        ({"type": "started", "pid": True}, "field 'pid' must be int"),
        ({"type": "stop", "grace_s": float("nan")}, "field 'grace_s' must be float"),
        ({"type": "log", "lines": ["ok", 3]}, "field 'lines' must be list[str]"),
        ({"type": "progress", "metrics": {1: 2}}, "field 'metrics' must be dict"),
        ({"type": "started", "pid": 7, "cmd": "rm -rf /"}, "unknown fields ['cmd']"),
    ],
)
def test_a_malformed_message_is_refused_naming_the_problem(data, problem):
    with pytest.raises(protocol.ProtocolError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        protocol.parse(data)


def test_a_message_of_another_type_than_expected_is_refused():
    with pytest.raises(protocol.ProtocolError, match="unexpected 'stop' message .expected 'ack'"):
        protocol.parse(protocol.Stop().wire(), protocol.Ack)


def test_messages_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        protocol.Done(rows=1).rows = 2
