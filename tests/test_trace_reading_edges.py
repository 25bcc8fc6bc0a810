"""Edges of the trace reader (nrlprof.tools.read.traces): files that cannot be opened, headers that say little or
too much or hold values of the wrong type, cut-short event lists, long values in reasons, Chrome events as a list
or an object, and the order and labels traces are listed with.

Each trace is text written by hand and each expectation is the exact value or reason a user sees.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
from pathlib import Path

import pytest

from nrlprof.errors import ToolError
from nrlprof.tools.read import traces
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.traces import (
    TraceReader,
    check_events,
    find_traces,
    gc_paused,
    iter_event_batches,
    read_header,
    unexpected_content,
)

# each test takes milliseconds: a reader that loops forever on a cut file fails here, not at the suite's limit
pytestmark = pytest.mark.timeout(10)

EVENT = '{"ph": "X", "name": "matmul", "ts": 10, "dur": 5, "pid": 7, "tid": 1}'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def header_of(tmp_path: Path, name: str, **top: object) -> traces.TraceHeader:
    """The header read back from a trace named `name` whose top-level keys are `top`, then one event."""
    return read_header(write(tmp_path / name, json.dumps(top | {"traceEvents": [json.loads(EVENT)]})))


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_file_that_cannot_be_opened_is_named_with_the_system_reason(tmp_path):
    with pytest.raises(ToolError) as missing:
        list(iter_event_batches(tmp_path / "gone.pt.trace.json"))
    assert missing.value.reason == "cannot open: No such file or directory"
    directory = tmp_path / "policy.rank0.steps3.9.pt.trace.json"
    directory.mkdir()
    with pytest.raises(ToolError) as folder:
        read_header(directory)
    assert folder.value.reason == "cannot open: Is a directory"


def test_closing_a_reader_gives_its_file_back(tmp_path):
    path = write(tmp_path / "t.pt.trace.json", f'{{"traceEvents": [{EVENT}]}}')
    before = open_descriptors()
    reader = TraceReader(path)
    assert open_descriptors() == before + 1
    reader.close()
    assert open_descriptors() == before
    with TraceReader(path) as held:
        assert held.read(1) == b"{"
    assert open_descriptors() == before  # `held` is still referenced: its file was closed, not collected


def test_worker_from_the_nrlprof_block_then_the_trace_name_then_the_file_name(tmp_path):
    named = "policy.rank0.steps3-4.1000.pt.trace.json"
    assert header_of(tmp_path / "a", named, nrlprof={"worker": "trainer"}).worker == "trainer"
    assert header_of(tmp_path / "b", named).worker == "policy"
    assert header_of(tmp_path / "c", "run7.capture.json", schemaVersion=1).worker == "run7"


def test_rank_from_the_nrlprof_block_then_distributed_info_then_the_name(tmp_path):
    unranked = "policy.steps3.1000.pt.trace.json"
    assert header_of(tmp_path / "a", unranked, distributedInfo={"rank": 3}).rank == 3
    assert header_of(tmp_path / "b", unranked, nrlprof={"rank": 5}, distributedInfo={"rank": 3}).rank == 5
    assert header_of(tmp_path / "c", "policy.rank2.steps3.1000.pt.trace.json").rank == 2
    assert header_of(tmp_path / "d", unranked).rank is None
    # torch gives the driver a distributedInfo of rank 0 too: the controller has no rank
    controller = header_of(tmp_path / "e", "controller.steps3.1000.pt.trace.json", distributedInfo={"rank": 0})
    assert controller.rank is None
    assert controller.label == "controller (?)"


def test_pid_from_the_nrlprof_block_then_the_trace_name(tmp_path):
    named = "policy.rank0.steps3.1234.pt.trace.json"
    assert header_of(tmp_path / "a", named).pid == 1234
    assert header_of(tmp_path / "b", named, nrlprof={"pid": 55}).pid == 55
    assert header_of(tmp_path / "c", "run7.capture.json").pid is None


@pytest.mark.parametrize(
    ("top", "base"),
    [({}, 0), ({"baseTimeNanoseconds": 1_700_000_000_000_000_000}, 1_700_000_000_000_000_000),
     ({"baseTimeNanoseconds": "17"}, 0), ({"baseTimeNanoseconds": 1e40}, 0)],
    ids=["absent", "integer", "string", "too-large"],
)  # fmt: skip
def test_base_time_is_zero_unless_a_usable_number(tmp_path, top, base):
    assert header_of(tmp_path, "policy.rank0.steps3.1000.pt.trace.json", **top).base_time_ns == base


def test_traces_of_one_worker_sort_by_rank_then_pid_then_first_step_not_by_name(tmp_path):
    def trace(directory: str, name: str, **block: object) -> traces.TraceHeader:
        return header_of(tmp_path / directory, name, nrlprof={"worker": "policy", "host": "n"} | block)

    headers = [
        trace("rank0", "policy.rank0.steps3.20.pt.trace.json", rank=0, pid=20, host="a"),
        trace("no-rank", "policy.steps3.21.pt.trace.json", pid=21, host="b"),
        # the same rank and host: the smaller pid first, though its name sorts after
        trace("pid10", "policy.rank1.steps3.10.pt.trace.json", rank=1, pid=10),
        trace("pid9", "policy.rank1.steps3.9.pt.trace.json", rank=1, pid=9),
        # one process, two windows: the earlier step first, though its name sorts after
        trace("step10", "policy.rank2.steps10-11.30.pt.trace.json", rank=2, pid=30, steps=[10, 11]),
        trace("step9", "policy.rank2.steps9.30.pt.trace.json", rank=2, pid=30, steps=[9]),
    ]
    ordered = [h.path.parent.name for h in sorted(headers, key=traces.TraceHeader.sort_key)]
    assert ordered == ["no-rank", "rank0", "pid9", "pid10", "step9", "step10"]


def test_a_long_value_in_a_reason_is_cut_to_sixty_characters(tmp_path):
    with pytest.raises(ToolError) as long:
        check_events([{"ph": "X"}, list(range(30))], tmp_path / "t.json")
    assert long.value.reason == (
        "an event is not a JSON object: "
        "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16... (item 1 of a batch)"
    )
    sixty = "x" * 58  # its repr, quotes included, is 60 characters: shown whole
    with pytest.raises(ToolError) as whole:
        check_events([sixty], tmp_path / "t.json")
    assert whole.value.reason == f"an event is not a JSON object: '{sixty}' (item 0 of a batch)"


def test_unexpected_content_gives_the_first_line_of_the_error_or_its_type():
    assert unexpected_content(TypeError("first line\nsecond line")) == "unexpected content (TypeError: first line)"
    assert unexpected_content(KeyError()) == "unexpected content (KeyError: KeyError)"


def test_a_top_level_list_given_by_name_is_not_a_trace(tmp_path):
    named = write(tmp_path / "events.json", f"[{EVENT}]")
    assert find_traces([named]) == ([], [(named, "not a Chrome trace: the top level is not a JSON object")])


def test_a_header_larger_than_the_limit_is_not_a_trace(tmp_path, monkeypatch):
    """The header reader stops after _HEADER_LIMIT bytes without traceEvents (64 MiB; 1 MiB here)."""
    monkeypatch.setattr(traces, "_HEADER_LIMIT", 1 << 20)
    keys = ", ".join(f'"key{i}": "{"x" * 1000}"' for i in range(1100))
    path = write(tmp_path / "policy.rank0.steps3.1000.pt.trace.json", f'{{{keys}, "traceEvents": [{EVENT}]}}')
    with pytest.raises(ToolError) as large:
        read_header(path)
    assert large.value.reason == "not a Chrome trace: no traceEvents in the first 1 MiB"


def test_progress_of_a_kineto_laid_out_trace_reaches_the_file_size(tmp_path):
    text = '{\n  "schemaVersion": 1,\n  "traceEvents": [\n  {\n    "ph": "X", "name": "a", "ts": 1\n  },\n  {\n'
    text += '    "ph": "X", "name": "b", "ts": 2\n  }\n],\n  "traceName": "t"\n}\n'
    path = write(tmp_path / "policy.rank0.steps3.1000.pt.trace.json", text)
    seen: list[int] = []
    batches = list(iter_event_batches(path, progress=seen.append))
    assert batches == [[{"ph": "X", "name": "a", "ts": 1}, {"ph": "X", "name": "b", "ts": 2}]]
    assert seen == [len(text)]


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_a_trace_cut_right_after_its_events_bracket_is_cut_short(tmp_path, gzipped):
    text = b'{\n  "schemaVersion": 1,\n  "traceEvents": [\n  \n'
    path = tmp_path / ("policy.rank0.steps3.1000.pt.trace.json" + (".gz" if gzipped else ""))
    path.write_bytes(gzip.compress(text) if gzipped else text)
    with pytest.raises(ToolError) as cut:
        list(iter_event_batches(path))
    assert cut.value.reason == "not valid JSON, or cut short (parse error: premature EOF)"


def kineto_layout(events: list[str], separator: str = ",") -> str:
    """Events laid out as kineto writes them: each closing brace alone on a line at the events' indent."""
    body = f"{separator}".join("\n  {\n    " + event[1:-1].strip() + "\n  }" for event in events)
    return '{\n  "schemaVersion": 1,\n  "traceEvents": [' + body + '\n],\n  "traceName": "t"\n}\n'


def large_event(name: str, size: int) -> str:
    return json.dumps({"ph": "i", "name": name, "ts": 1, "args": {"note": "x" * size}})


def test_a_large_kineto_trace_is_read_a_slice_at_a_time(tmp_path):
    """The reader holds about 64 KiB of text at a time, never the whole file: 40 events of 16 KiB come in
    batches of a few events."""
    events = [large_event(f"e{i}", 16 << 10) for i in range(40)]
    path = write(tmp_path / "policy.rank0.steps3.1000.pt.trace.json", kineto_layout(events))
    batches = list(iter_event_batches(path))
    assert [e["name"] for batch in batches for e in batch] == [f"e{i}" for i in range(40)]
    assert max(map(len, batches)) <= 8


def test_a_kineto_trace_with_a_damaged_separator_is_not_valid_json(tmp_path):
    """A `;` where the comma between two events should be, after the first slice of text."""
    events = [large_event("first", 100 << 10), large_event("second", 100 << 10)]
    path = write(tmp_path / "policy.rank0.steps3.1000.pt.trace.json", kineto_layout(events, separator=";"))
    with pytest.raises(ToolError) as damaged:
        list(iter_event_batches(path))
    assert damaged.value.reason == "not valid JSON, or cut short (lexical error: invalid char in json text.)"


def test_an_item_that_is_not_an_object_is_read_as_it_is_after_a_slice(tmp_path):
    """A number right after the comma that follows the first slice of text: given whole, for the caller to refuse."""
    first, second = large_event("first", 100 << 10), large_event("second", 100 << 10)
    text = kineto_layout([first, second]).replace("\n  },\n  {", "\n  },17,\n  {")
    path = write(tmp_path / "policy.rank0.steps3.1000.pt.trace.json", text)
    items = [item for batch in iter_event_batches(path) for item in batch]
    assert [item if item == 17 else item["name"] for item in items] == ["first", 17, "second"]


def test_a_kineto_trace_whose_events_bracket_is_damaged_is_not_valid_json(tmp_path):
    """`}` where the `]` closing the events should be, with the rest of the object intact after it."""
    path = write(tmp_path / "policy.rank0.steps3.1000.pt.trace.json", kineto_layout([EVENT]).replace("\n],", "\n},"))
    with pytest.raises(ToolError) as damaged:
        list(iter_event_batches(path))
    expected = "not valid JSON, or cut short (parse error: after array element, I expect ',' or ']')"
    assert damaged.value.reason == expected


def test_progress_of_a_trace_on_one_line_reaches_the_file_size(tmp_path):
    text = f'{{"schemaVersion": 1, "traceEvents": [{EVENT}, {EVENT}]}}'
    path = write(tmp_path / "policy.rank0.steps3.1000.pt.trace.json", text)
    seen: list[int] = []
    batches = list(iter_event_batches(path, progress=seen.append))
    assert batches == [[json.loads(EVENT), json.loads(EVENT)]]
    assert seen == [len(text)]


def test_reports_under_a_directory_are_files_named_as_reports_and_not_hidden(tmp_path):
    (tmp_path / "policy_3-4_100.nsys-rep").write_bytes(b"report")
    (tmp_path / "old" / "policy_3_90.qdrep").parent.mkdir()
    (tmp_path / "old" / "policy_3_90.qdrep").write_bytes(b"report")
    (tmp_path / ".policy_3_80.nsys-rep").write_bytes(b"hidden")
    (tmp_path / "notes.txt").write_text("not a report")
    (tmp_path / "folder.nsys-rep").mkdir()
    found = find_inputs([str(tmp_path)]).nsys_reports  # a path given as text, as a command line gives it
    assert found == [tmp_path / "old" / "policy_3_90.qdrep", tmp_path / "policy_3-4_100.nsys-rep"]


def test_the_garbage_collector_is_off_while_paused_and_back_after():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.parametrize("offset", range(-20, 3))
def test_the_events_key_split_across_two_reads_is_found(tmp_path, offset):
    """`"traceEvents": [` straddling the reader's 64 KiB reads, at every split point, still opens the fast path."""
    prefix = '{"meta": "'
    padding = traces._CHUNK + offset - len(prefix) - len('", ')
    path = tmp_path / "split.pt.trace.json"
    path.write_text(prefix + "y" * padding + '", "traceEvents": [\n  {\n    "ph": "X", "ts": 1\n  }\n  ]\n}')
    with traces.TraceReader(path) as reader:
        assert list(traces._split_batches(reader)) == [[{"ph": "X", "ts": 1}]]


def write_trace(path, block: dict | None) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    top = {"schemaVersion": 1} | ({"nrlprof": block} if block is not None else {})
    path.write_text(json.dumps(top | {"traceEvents": [{"name": "x", "ph": "X", "ts": 1, "dur": 1, "pid": 1}]}))


def test_traces_sort_controller_first_then_worker_and_rank_and_label_each(tmp_path):
    from nrlprof.tools.read.traces import find_traces

    write_trace(tmp_path / "w" / "1" / "w.rank1.steps2.7.pt.trace.json", {"worker": "w", "rank": 1, "host": "n1"})
    write_trace(tmp_path / "w" / "0" / "w.rank0.steps2.8.pt.trace.json", {"worker": "w", "rank": 0, "host": "n1"})
    write_trace(tmp_path / "a" / "0" / "a.rank0.steps2.9.pt.trace.json", {"worker": "a", "rank": 0, "host": "n2"})
    write_trace(tmp_path / "controller.steps2.5.pt.trace.json", {"worker": "controller", "host": "n0"})
    found, unreadable = find_traces([tmp_path])
    assert unreadable == []
    ordered = sorted(found, key=lambda h: h.sort_key())
    assert [h.label for h in ordered] == ["controller (n0)", "a rank 0 (n2)", "w rank 0 (n1)", "w rank 1 (n1)"]


def test_a_named_trace_without_events_is_reported_unreadable(tmp_path):
    import json

    from nrlprof.tools.read.traces import find_traces

    named = tmp_path / "w.rank0.steps2.7.pt.trace.json"
    named.write_text(json.dumps({"schemaVersion": 1}))
    other = tmp_path / "notes.json"
    other.write_text(json.dumps({"a": 1}))
    found, unreadable = find_traces([tmp_path])
    assert found == []
    assert [(p.name, why) for p, why in unreadable] == [(named.name, "not a Chrome trace: no traceEvents")]


def test_chrome_events_of_a_list_an_object_and_neither(tmp_path):
    import json

    from nrlprof.errors import ToolError
    from nrlprof.tools.read.traces import iter_chrome_events

    events = [{"name": "a", "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]
    listed, wrapped, other = tmp_path / "timeline.json", tmp_path / "t.pt.trace.json", tmp_path / "x.json"
    listed.write_text(json.dumps(events))
    wrapped.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    other.write_text('"text"')
    assert [e for batch in iter_chrome_events(listed) for e in batch] == events
    assert [e for batch in iter_chrome_events(wrapped) for e in batch] == events
    with pytest.raises(ToolError, match="not a Chrome trace"):
        list(iter_chrome_events(other))


def test_a_trace_cut_right_after_its_events_key_or_without_one_ends_the_read(tmp_path):
    from nrlprof.errors import ToolError
    from nrlprof.tools.read.traces import iter_event_batches

    cut = tmp_path / "cut.pt.trace.json"
    cut.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": ')
    with pytest.raises(ToolError, match="cut short"):
        list(iter_event_batches(cut))
    keyless = tmp_path / "keyless.pt.trace.json"
    keyless.write_text('{"schemaVersion": 1}')
    assert list(iter_event_batches(keyless)) == []


@pytest.mark.parametrize(
    ("block", "why"),
    [
        ({"worker": 5}, "nrlprof.worker is 5, expected a string"),
        ({"host": ["n"]}, "nrlprof.host is ['n'], expected a string"),
        ({"rank": "0"}, "nrlprof.rank is '0', expected an integer"),
        ({"rank": True}, "nrlprof.rank is True, expected an integer"),
        ({"steps": [1, "2"]}, "nrlprof.steps is [1, '2'], expected a list of integers"),
    ],
)
def test_a_trace_whose_nrlprof_block_has_wrong_types_is_reported(tmp_path, block, why):
    from nrlprof.tools.read.traces import find_traces

    path = tmp_path / "w.rank0.steps2.7.pt.trace.json"
    write_trace(path, block)
    found, unreadable = find_traces([tmp_path])
    assert found == [] and unreadable == [(path, why)]
