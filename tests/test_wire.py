"""Everything that crosses a process, through the one codec (nrlprof/wire.py): each message round-trips, a message
that is not its type is refused with where it is wrong, and no message carries a field nobody reads."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from nrlprof import wire
from nrlprof.config.env import plan_from_env
from nrlprof.config.plan import Plan, Target
from nrlprof.config.requests import Card, Reply, Request, SlowBudget, WorkerRow
from nrlprof.launch.runtime_env import WorkerDescriptor, parse_worker_descriptor, worker_descriptor
from nrlprof.manifest import Slowest, Status, Trigger, WindowRecord
from nrlprof.runtime.children.protocol import Actions, ChannelInfo, Enable, Hello, LineReader, encode
from nrlprof.runtime.steps.adoption import Described
from nrlprof.runtime.windows.fanout import Answer
from nrlprof.runtime.windows.profiler import START, STOP, Action
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_worker

PACKAGE = Path(wire.__file__).parent
PLAN = dataclasses.replace(plan_from_env({
    "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4,7",
    "NRL_TORCH_PROFILE_RANKS": "0,1", "NRL_NSYS_WORKER_PATTERNS": "*gen*", "NRL_NSYS_PROFILE_STEP_RANGE": "3",
    "NRL_NSYS_EXTRA_OPTIONS": '{"s": "none"}', "NRL_PROFILE_ON_DEMAND": "1", "NRL_STEP_METHOD": "*policy*.train",
    "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*ref*", "NRL_MEMORY_PROFILE_STEP_RANGE": "slow:keep",
    "NRL_PROFILE_SLOW_FACTOR": "2", "NRL_PROFILE_SLOW_STEPS": "2", "NRL_PROFILE_SLOW_MAX": "5",
}), log_level="DEBUG", timeout_s=30.0, sources=("verl",), framework_config=True, controller_nsys=(("t", "cuda"),),
    max_host_mb=512)  # fmt: skip
IDENTITY = WorkerIdentity("WorkerDict", "wd-0", 3, None, ("actor_rollout", "critic"), "verl")
TRIGGER = Trigger(1, 512.0, 100.0, 5.1, Slowest("policy", 1, "train", 412.0, 101.0), "straggler")
RECORD = WindowRecord("torch", "policy", 1, (2, 3), "2-3", ("/t/a.json",), Status.LATE, "busy", "node7", "10.0.0.7",
                      42, 1.5, 2.5, 3.0, 4.0, 5.0, "call", "r1", TRIGGER)  # fmt: skip
ROW = WorkerRow("policy", (0, 1))
# One of each message, its every field set.
MESSAGES = [
    PLAN,
    WorkerDescriptor(IDENTITY, {"torch": Target("*dict*", None, True, ("train",), True)}, "parent"),
    Request("01000000", "torch", ("*policy*", "*ref*"), 3, frozenset({0, 2}), "h (1.2.3.4)", "abc"),
    Card("01000000", "driver", "h", 7, 12, (ROW,), 1.25, False, SlowBudget(("torch slow",), 1.5, 1, 3, (7,))),
    Reply("closed", "m", "01000000", "driver", "h", 7, "torch", "4-5", 4, 5, (ROW,), 2, (RECORD,)),
    RECORD,
    Hello("engine_core_0"),
    Actions((Action("torch", START, 4, 5, 4, True, "r1", TRIGGER), Action("torch", STOP)), 12.5),
    Enable("{}", "{}", "memory", "/tmp/ray/session_1", "10.0.0.7"),
    Answer(("torch",), (RECORD,), (RECORD,), "engine_core_0"),
    ChannelInfo("@nrlprof-1-ab", "/tmp/ray/session_1", "10.0.0.7"),
    Described(IDENTITY, ("torch", "nsys"), False),
]


@pytest.mark.parametrize("message", MESSAGES, ids=[type(m).__name__ for m in MESSAGES])
def test_every_message_round_trips(message):
    assert wire.decode(wire.encode(message), type(message)) == message


@pytest.mark.parametrize("message", MESSAGES, ids=[type(m).__name__ for m in MESSAGES])
def test_every_field_of_a_message_is_set_in_the_sample(message):
    """So the round trip covers each field: none left at its default."""
    defaults = [f.name for f in dataclasses.fields(message) if f.default is not dataclasses.MISSING
                and getattr(message, f.name) == f.default]  # fmt: skip
    assert defaults == []


def test_the_channels_lines_are_read_back_as_the_messages_written():
    reader = LineReader()
    lines = b"".join(encode(m) for m in MESSAGES if isinstance(m, (Hello, Actions, Enable, Answer)))
    read = reader.feed(lines[:17]) + reader.feed(lines[17:] + b"[1]\n{not json\n")
    assert read == [m for m in MESSAGES if isinstance(m, (Hello, Actions, Enable, Answer))]


def test_the_worker_descriptor_leaves_the_ranks_of_its_match_out():
    plan = plan_from_env({"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "2",
                          "NRL_TORCH_PROFILE_RANKS": "1"})  # fmt: skip
    identity = WorkerIdentity("PolicyWorker", None, 1)
    descriptor = parse_worker_descriptor(worker_descriptor(identity, match_worker(plan, identity)))
    assert descriptor == WorkerDescriptor(identity, {"torch": Target("*policy*")}, None)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '{"job": "1", "controller": "d", "host": "h", "pid": 7, "step": null, "workers": [], "at": 1, "x": 2}',
            "no field x",
        ),
        ('{"job": "1", "controller": "d", "host": "h", "pid": "7", "step": null, "workers": [], "at": 1}', "pid"),
        ('{"job": "1", "controller": "d", "host": "h", "pid": 7, "step": null, "workers": []}', "at missing"),
        (
            '{"job": "1", "controller": "d", "host": "h", "pid": 7, "step": null, "workers": [{"name": 1}], "at": 1}',
            r"workers\[0\]",
        ),
        ('{"job": "1", "controller": "d", "host": "h", "pid": true, "step": null, "workers": [], "at": 1}', "pid"),
        ("[]", "not an object"),
        ("{", "not JSON"),
    ],
)
def test_a_message_of_another_shape_is_refused_naming_where(text, said):
    with pytest.raises(wire.WireError, match=said):
        wire.decode(text, Card)


def test_a_status_no_manifest_knows_is_refused():
    line = {**RECORD.as_dict(), "status": "fine"}
    with pytest.raises(wire.WireError, match="status"):
        wire.convert(line, WindowRecord)


def fields_read() -> set[str]:
    """Every attribute nrlprof reads, and every string it uses as a key (readers of a manifest line's dict)."""
    read = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "wire.py":  # the codec reads every field by its name
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                read.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                read.add(node.value)
    return read


def test_no_message_carries_a_field_nobody_reads():
    read = fields_read()
    unread = [f"{type(m).__name__}.{f.name}" for m in MESSAGES for f in dataclasses.fields(m) if f.name not in read]
    assert unread == []


def test_the_check_sees_a_field_nobody_reads():
    @dataclasses.dataclass(frozen=True)
    class CardWithAFieldNobodyReads(Card):
        nsys_armed_and_never_read: bool = True

    names = {f.name for f in dataclasses.fields(CardWithAFieldNobodyReads)}
    assert names - fields_read() == {"nsys_armed_and_never_read"}
    assert Plan.from_json(PLAN.to_json()) == PLAN
