"""The message definitions of sparkdl/transport/protocol.py: every message survives its wire form, and
anything a peer could send wrong is refused with a ProtocolError naming the problem."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sparkdl.transport import protocol

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
    protocol.StreamPosition(qname="input", batch_id=7),
    protocol.Inferred(run="r", stage=3, partition=None, rows=5),
    protocol.Result({"runs": [{"loss": [0.5, -1.25]}], "count": -3}),
    protocol.ClusterSpec({"worker": ["h:1", "h:2"]}),
    protocol.Abort("too late"),
    protocol.Stop(grace_s=5.0),
    protocol.Stall("made no progress"),
    protocol.Plan(
        protocol.TrainingPlan(session=1, epochs=3, rows_per_epoch=100, cache=True, cache_max_bytes=1 << 20, seed=9),
        timeout=60.0,
    ),
    protocol.Train(session=1, partition=2, epoch=1, split="validation", timeout=30.0),
    protocol.Infer(partition=4, run="r", stage=2),
    protocol.CacheSeal(session=1),
    protocol.CacheUse(session=1, use=True),
    protocol.End(qname="other"),
    protocol.EpochGate(epoch=3, go_on=False),
    protocol.Done(rows=5),
    protocol.Ack(rows=5),
    protocol.CacheStatus(problem=None),
    protocol.Terminated(),
    protocol.Rejected("column 'x' differs"),
    protocol.Dropped("sent nothing for 10 s"),
    protocol.Complete(rows=5),
    protocol.BadRows(qname="input", session=2, rows=3, example="column 'image', partition 1, row 7: not an image"),
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
        ({"type": "stop", "grace_s": float("nan")}, "field 'grace_s' must be a finite number"),
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


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"type": "stop", "grace_s": Infinity}', "field 'grace_s' must be a finite number, got inf"),
        ('{"type": "stop", "grace_s": NaN}', "field 'grace_s' must be a finite number, got nan"),
        ('{"type": "train", "session": 1, "timeout": -Infinity}', "field 'timeout' must be a finite number"),
        ('{"type": "plan", "plan": {"session": 1}, "timeout": 0}', "'timeout' must be positi"),
        ('{"type": "cache_seal", "session": 1, "timeout": -5.0}', "field 'timeout' must be positive, got -5.0"),
        ('{"type": "done", "rows": -1}', "field 'rows' must not be negative, got -1"),
        ('{"type": "train", "session": -1}', "field 'session' must not be negative"),
        ('{"type": "train", "session": 1, "epoch": -2}', "field 'epoch' must not be negative"),
        ('{"type": "train", "session": 1, "partition": -3}', "field 'partition' must not be negative"),
        ('{"type": "train", "session": 1, "attempt": -1}', "field 'attempt' must not be negative"),
        ('{"type": "infer", "partition": -1}', "field 'partition' must not be negative"),
        ('{"type": "plan", "plan": {"session": 1, "epochs": 0}}', "field 'plan': field 'epochs' must be positive"),
        ('{"type": "plan", "plan": {"session": -1}}', "field 'plan': field 'session' must not be negative"),
        ('{"type": "plan", "plan": {"seed": -7}}', "'seed' must not be"),
        ('{"type": "plan", "plan": {"cache_max_bytes": -1}}', "must not be"),
        ('{"type": "plan", "plan": {"feed_timeout": 0}}', "field 'feed_timeout' must be positive"),
        ('{"type": "started", "pid": 9223372036854775808}', "field 'pid' must fit in 64 bits, got 9223372036854775808"),
        ('{"type": "ack", "rows": -9223372036854775809}', "field 'rows' must fit in 64 bits"),
        ('{"type": "feed_ready", "port": 1e400}', "field 'port' must be int"),  # 1e400 parses as inf: a float
        ('{"type": "stop", "grace_s": 1e400}', "field 'grace_s' must be a finite number, got inf"),
        ('{"type": "stop", "grace_s": -1.0}', "field 'grace_s' must not be negative"),
    ],
)
def test_a_number_out_of_range_is_refused_naming_the_field(text, problem):
    """Python's json reads NaN, Infinity and integers of any size: parse refuses what no peer of
    sparkdl sends (every number on the wire is a count, id, size, seed or duration)."""
    with pytest.raises(protocol.ProtocolError, match=problem.replace("(", r"\(")):
        protocol.parse(json.loads(text))


def test_numbers_at_the_edges_of_their_range_are_accepted():
    assert protocol.parse({"type": "started", "pid": 2**63 - 1}) == protocol.Started(pid=2**63 - 1)
    assert protocol.parse({"type": "done", "rows": 0}) == protocol.Done(rows=0)
    assert protocol.parse({"type": "stop", "grace_s": 0}) == protocol.Stop(grace_s=0)
    assert protocol.parse({"type": "train", "session": 0, "timeout": 1e-3}).timeout == 1e-3
    assert protocol.parse({"type": "ack", "rows": None}) == protocol.Ack()
    # free-form payloads are not numbers of the protocol: a diverged loss is news, not an attack
    assert protocol.parse(json.loads('{"type": "progress", "metrics": {"loss": NaN}}')).metrics["loss"] != 0
    # nor is what map_fun returned: a negative or NaN result travels as it is
    assert protocol.parse({"type": "result", "value": -7}) == protocol.Result(-7)
    assert protocol.parse(json.loads('{"type": "result", "value": NaN}')).value != 0
    assert protocol.parse({"type": "result"}) == protocol.Result(None)


def test_a_training_plan_crosses_the_wire_as_it_is():
    """A ``cluster.train`` call is one ``TrainingPlan`` from ``train()`` to the node's reader: the
    ``Plan`` message carries it whole, so a new option is one field and nothing copies it by hand."""
    plan = protocol.TrainingPlan(
        epochs=3, qname="q", feed_timeout=30.0, cache=True, cache_max_bytes=9, shuffle=True, seed=4,
        deterministic=True, first_epoch=1, batch_id=7, bad_rows="skip", session=2, rows_per_epoch=7,
        validation_rows=1, node=1, partition_rows=(3, 0, 4),
    )  # fmt: skip
    assert {f.name for f in dataclasses.fields(protocol.Plan)} == {"plan", "timeout"}
    received = protocol.parse(json.loads(json.dumps(protocol.Plan(plan).wire())), protocol.Plan).plan
    assert received == plan and type(received) is protocol.TrainingPlan
    assert received.splits == ("train", "validation") and received.total_rows("validation") == 3


def test_a_training_plan_with_an_unknown_or_mistyped_field_is_refused_naming_it():
    with pytest.raises(protocol.ProtocolError, match="field 'plan': unknown fields \\['rm'\\]"):
        protocol.parse({"type": "plan", "plan": {"rm": 1}})
    with pytest.raises(protocol.ProtocolError, match="field 'plan': field 'shuffle' must be bool, got str"):
        protocol.parse({"type": "plan", "plan": {"shuffle": "yes"}})
    with pytest.raises(protocol.ProtocolError, match="field 'plan' must be TrainingPlan, got list"):
        protocol.parse({"type": "plan", "plan": [1]})
    # bad_rows is one of a few words (a Literal), checked on the wire like any other field
    with pytest.raises(
        protocol.ProtocolError, match="field 'bad_rows' must be one of \\('fail', 'skip'\\), got 'drop'"
    ):
        protocol.parse({"type": "plan", "plan": {"bad_rows": "drop"}})
    with pytest.raises(protocol.ProtocolError, match="field 'bad_rows' must be one of .*, got 1"):
        protocol.parse({"type": "plan", "plan": {"bad_rows": 1}})
    with pytest.raises(protocol.ProtocolError, match="field 'partition_rows' must not be negative, got -1"):
        protocol.parse({"type": "plan", "plan": {"partition_rows": [3, -1]}})
    with pytest.raises(protocol.ProtocolError, match="field 'partition_rows' must be tuple\\[int, ...\\], got list"):
        protocol.parse({"type": "plan", "plan": {"partition_rows": [3, 1.5]}})
