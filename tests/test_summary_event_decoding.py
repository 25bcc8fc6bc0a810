"""summary decodes kineto-laid-out slices into small structs (tools.trace_events) and falls back to dicts.

Every figure must be what the dict path (orjson's dicts, through `_as_events`) gives for the same file:
the struct path is only a faster way to the same answer, for well-formed and hostile traces alike.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from helpers.traces import BAD, GOOD, gpu_trace, kineto_text, rank1_trace, write_json

from nrlprof.tools.figures import trace_stats
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.figures.trace_pool import read_one
from nrlprof.tools.read import traces
from nrlprof.tools.read.trace_events import Args, Event, decode_events
from nrlprof.tools.read.traces import find_traces


def test_well_formed_events_become_structs_with_the_values_orjson_reads():
    text = (
        b'[{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2.5,'
        b' "args": {"correlation": 3, "grid": [1, 1, 1], "blocks per SM": 1.0}},'
        b' {"ph": "M", "name": "process_name", "pid": "Spans", "args": {"name": "python"}},'
        b' {"ph": "X", "ts": 1700000000000000.125, "args": null}, {}]'
    )
    events = decode_events(text)
    assert events == [
        Event("X", "kernel", "k", 10, 2.5, 0, 7, Args(3)),
        Event("M", None, "process_name", None, None, "Spans", None, Args(None)),
        Event("X", None, "", 1700000000000000.125, None, None, None, None),
        Event(),
    ]
    # integers stay integers and decimals floats, as orjson reads them
    assert [type(events[0].ts), type(events[0].dur)] == [int, float]


@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph": "X", "ts": "1", "dur": 2}]',  # a number as a string
        b'[{"ph": "X", "ts": 1, "dur": true}]',  # a boolean for a number
        b'[{"ph": "X", "name": 5}]',  # a name that is not a string
        b'[{"ph": "X", "name": null}]',  # null where dict.get gives None, not the default
        b'[{"ph": "X", "pid": [1]}]',  # an unhashable thread key
        b'[{"ph": "X", "args": "not a dict"}]',
        b'[{"ph": "X", "args": []}]',
        b'[{"ph": "X", "args": {"correlation": "7"}}]',
        b'[{"ph": "X", "args": {"correlation": [7]}}]',
        b'[{"ph": "X"}, 5]',  # an event that is not an object
        b'[{"ph": "X", "pid": 123456789012345678901234567890}]',  # beyond 64 bits: orjson reads a float
        b'[{"ph": "X", "ts": -9223372036854775809}]',  # below -2**63: a float too
        b'[{"ph": "X", "args": {"correlation": 9223372036854775808}}]',  # 2**63: msgspec cannot bound it
    ],
)
def test_other_slices_are_orjsons_dicts(text):
    assert decode_events(text) == orjson.loads(text)
    assert all(not isinstance(e, Event) for e in decode_events(text))


@pytest.mark.parametrize(
    "text, event",
    [
        ('[{"ph": "X", "name": "caf\u00e9"}]'.encode(), Event("X", name="caf\u00e9")),
        (b'[{"ph": "X", "name": "gr\\u00fc\\u00df"}]', Event("X", name="gr\u00fc\u00df")),  # escaped
        (b'[{"ph": "X", "ts": 1.5e3, "dur": 1e300, "other": 2E-5}]', Event("X", ts=1500.0, dur=1e300)),
        (b'[{"ph": "X", "ts": -9223372036854775808}]', Event("X", ts=-(2**63))),
        (b'[{"ph": "X", "pid": 9223372036854775807}]', Event("X", pid=2**63 - 1)),
    ],
    ids=["utf-8", "escaped-non-ascii", "exponents", "lowest-int64", "highest-int64"],
)
def test_text_both_read_the_same_way_becomes_structs(text, event):
    (decoded,) = decode_events(text)
    assert decoded == event
    read = {key: value for key, value in orjson.loads(text)[0].items() if key != "other"}
    assert {key: (getattr(decoded, key), type(getattr(decoded, key))) for key in read} == {
        key: (value, type(value)) for key, value in read.items()
    }


@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph": "X", "name": "\xff\xfe"}]',  # invalid UTF-8 in a field summary reads
        b'[{"ph": "X", "ts": 1e400}]',  # beyond a double's range, in a field summary reads
        b'[{"ph": "X", "other": "\\ud800"}]',  # a lone surrogate
        b'[{"ph": "X",}]',
    ],
)
def test_text_orjson_refuses_is_refused(text):
    with pytest.raises(ValueError):
        orjson.loads(text)
    with pytest.raises(ValueError):
        decode_events(text)


@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph": "X", "other": "\xff\xfe"}]',  # invalid UTF-8 in a field summary does not read
        b'[{"ph": "X", "other": 1e400}]',  # beyond a double's range, where summary does not look
        b'[{"ph": "X", "other": ' + b"1" * 400 + b"}]",
    ],
)
def test_what_orjson_refuses_only_where_summary_does_not_look_is_read(text):
    with pytest.raises(ValueError):
        orjson.loads(text)
    assert decode_events(text) == [Event("X")]


def kernel(**values: object) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0e6, "dur": 2.0} | values


def cpu_op(**values: object) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1.0e6, "dur": 2.0} | values


def launch(**values: object) -> dict:
    return cpu_op(cat="cuda_runtime", name="cudaLaunchKernel") | values


def kineto_run(tmp_path: Path, trace: dict | bytes) -> Path:
    """A json.dump-laid-out rank-0 trace (ijson's) and `trace` on rank 1 in kineto's layout (the slices')."""
    root = tmp_path / "run"
    write_json(root / "policy" / "0" / GOOD, gpu_trace())
    target = root / "policy" / "1" / BAD
    target.parent.mkdir(parents=True)
    target.write_bytes(trace if isinstance(trace, bytes) else kineto_text(trace).encode())
    return root


def summaries(root: Path, monkeypatch: pytest.MonkeyPatch, agree: bool = True) -> tuple[dict, dict, list[str]]:
    """summary --json through the structs, then through orjson's dicts alone; and the kinds of batches read.

    With `agree`, each trace's statistics (those summary --json does not show too, such as its time bounds)
    must be the same both ways.
    """
    kinds: list[str] = []

    def spy(text: bytes) -> list:
        events = decode_events(text)
        kinds.append("Event" if events and isinstance(events[0], Event) else "dicts")
        return events

    headers = find_traces([root])[0]
    monkeypatch.setattr(trace_stats, "decode_events", spy)
    fast = summarize(root, nsys="", jobs=1).to_json()
    monkeypatch.setattr(trace_stats, "decode_events", decode_events)
    fast_stats = [read_one(h) for h in headers]
    monkeypatch.setattr(trace_stats, "decode_events", orjson.loads)
    plain = summarize(root, nsys="", jobs=1).to_json()
    assert (fast_stats == [read_one(h) for h in headers]) == agree
    return fast, plain, kinds


def test_figures_are_the_dict_paths_and_the_recorded_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "_CHUNK", 512)  # many slices
    trace = rank1_trace()
    trace["traceEvents"] += [
        # launched as step 3 (1000000-1001000 us) ends, run in the gap before step 4: step 3's by correlation
        launch(pid=1001, tid=1001, ts=1001000.0, dur=5.0, args={"correlation": 99}),
        kernel(name="late", ts=1001500.0, dur=100.0, args={"correlation": 99}),
        # on a thread of its own, over step 4's last operator (1002610-1002660 us), the trace's last to end
        cpu_op(name="other thread", pid=1001, tid=2, ts=1002500.0, dur=2000.0),
        kernel(ph="i", name="not a complete event", ts=1000100.0, dur=10.0),  # only "X" events count
    ]
    fast, plain, kinds = summaries(kineto_run(tmp_path, trace), monkeypatch)
    assert fast == plain
    assert set(kinds) == {"Event"} and len(kinds) > 10
    # gpu_trace: steps 3 and 4 of 1 ms, each with four 100 us kernels (2 GEMMs, 2 elementwise) launched in it
    rank1 = next(w for w in fast["workers"] if w["rank"] == 1)
    assert {s: (v["wall_ms"], v["gpu_kernel_ms"], v["gpu_kernels"]) for s, v in rank1["steps"].items()} == {
        "3": (1.0, 0.5, 5),
        "4": (1.0, 0.4, 4),
    }
    assert {k["name"]: (k["calls"], k["total_ms"]) for k in rank1["top_kernels"]} == {
        "ampere_sgemm_128x64_nn": (4, 0.4),
        "elementwise_kernel": (4, 0.4),
        "late": (1, 0.1),
    }
    assert {o["name"]: (o["calls"], o["self_ms"]) for o in rank1["top_operators"]} == {
        "aten::mm": (4, 0.2),
        "aten::add": (4, 0.2),
        "other thread": (1, 2.0),
    }
    (stats,) = [read_one(h) for h in find_traces([tmp_path / "run" / "policy" / "1"])[0]]
    assert stats.end_us - stats.start_us == 4500.0


# an odd event, and whether its slice is read as dicts
ODD_EVENTS = {
    "ts-as-string": (cpu_op(ts="1"), True),
    "name-as-number": (cpu_op(name=12), True),
    "annotation-name-as-list": (cpu_op(cat="user_annotation", name=[1]), True),
    "name-null": (kernel(name=None), True),
    "pid-as-list": (cpu_op(pid=[1]), True),
    "args-not-object": (kernel(args="not a dict"), True),
    "launch-args-list": (launch(args=[1]), True),
    "correlation-as-list": (launch(args={"correlation": [1]}), True),
    "correlation-as-string": (kernel(ts=1002000.0, args={"correlation": "1"}), True),
    "huge-pid": (cpu_op(pid=2**70), True),
    "huge-duration": (kernel(dur=1e300), False),  # read, then left out as no profiler's
    "integer-times": (kernel(ts=1002000, dur=3), False),
    "escaped-non-ascii-name": (cpu_op(cat="user_annotation", name="gr\u00fc\u00df"), False),
    "no-args-no-pid": ({"ph": "X", "cat": "kernel", "name": "k", "ts": 1002000.0, "dur": 2.0}, False),
}


@pytest.mark.parametrize("kind", sorted(ODD_EVENTS))
def test_odd_values_give_what_the_dict_path_gives(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(traces, "_CHUNK", 512)  # the odd event's slice among well-formed ones
    event, as_dicts = ODD_EVENTS[kind]
    trace = rank1_trace()
    trace["traceEvents"].insert(20, event)
    fast, plain, kinds = summaries(kineto_run(tmp_path, trace), monkeypatch)
    assert fast == plain
    assert kinds.count("dicts") == as_dicts and kinds.count("Event") > 10


def test_an_event_that_is_not_an_object(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "_CHUNK", 512)
    text = kineto_text(rank1_trace()).replace("\n  },", "\n  },\n  5,", 1).encode()
    fast, plain, kinds = summaries(kineto_run(tmp_path, text), monkeypatch)
    assert fast == plain
    assert [s["reason"][:48] for s in fast["skipped"]] == ["an event is not a JSON object: 5 (item 1 of a ba"]
    assert kinds.count("dicts") == 1


@pytest.mark.parametrize(
    "field, orjson_refuses",
    [(b'"\xff\xfe"', True), (b"1e400", True), (b"123456789012345678901234567890", False)],
    ids=["invalid-utf8", "double-overflow", "integer-beyond-64-bits"],
)
def test_a_trace_with_odd_values_where_summary_does_not_look_is_read(tmp_path, monkeypatch, field, orjson_refuses):
    """Its figures are those of the same trace without the odd value, where reading with orjson alone would not be."""
    text = kineto_text(rank1_trace()).encode()
    marker = b'"cbid": 211'
    plain_root = kineto_run(tmp_path / "plain", text)
    root = kineto_run(tmp_path / "odd", text.replace(marker, b'"cbid": ' + field, 1))
    odd, by_orjson, _ = summaries(root, monkeypatch, agree=not orjson_refuses)
    plain = summarize(plain_root, nsys="", jobs=1).to_json()
    assert odd["skipped"] == [] and _without_paths(odd) == _without_paths(plain)
    refused = ["not valid JSON" in s["reason"] for s in by_orjson["skipped"]]
    assert refused == ([True] if orjson_refuses else [])


def _without_paths(summary: dict) -> dict:
    return {**summary, "directory": "", "workers": [{**w, "files": []} for w in summary["workers"]]}
