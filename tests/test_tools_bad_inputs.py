"""merge, summary and report on bad files: each bad file is skipped with its reason, the rest is finished.

The exit code is 1 (partial) and every good file's results are still there. Traces are GPU-shaped kineto
traces built by hand (helpers.traces.gpu_trace); one is written in kineto's own text layout to reach
the fast reader.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.traces import BAD, GOOD, events_of, gpu_trace, kineto_text, load, rank1_trace, run_dir, write_json

from nrlprof.cli import main
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.read import traces
from nrlprof.tools.read.traces import find_traces, iter_event_batches

DEPTH = 100_000
PEAK_PROGRAM = Path(__file__).parent / "programs" / "merge_and_summary_peak.py"


def with_events(*extra: object) -> dict:
    trace = rank1_trace()
    trace["traceEvents"] += list(extra)
    return trace


def deeply_nested(depth: int = DEPTH) -> bytes:
    return b'{"traceEvents": [' + b"[" * depth + b"]" * depth + b"]}"


BAD_TRACES = {
    "event-not-object": lambda: with_events(5, "text", None, [1, 2]),
    "events-not-a-list": lambda: rank1_trace() | {"traceEvents": {"0": {"ph": "X"}}},
    "pid-not-integer": lambda: rank1_trace(pid="abc"),
    "rank-not-integer": lambda: rank1_trace(rank=[1]),
    "steps-not-integers": lambda: rank1_trace(steps="3-4"),
    "deeply-nested": deeply_nested,
    "deep-header": lambda: b'{"meta": ' + b"[" * DEPTH + b"]" * DEPTH + b', "traceEvents": []}',
}
REASONS = {
    "event-not-object": "not a JSON object: 5",
    "events-not-a-list": "traceEvents is not a list",
    "pid-not-integer": "nrlprof.pid is 'abc', expected an integer",
    "rank-not-integer": "nrlprof.rank is [1], expected an integer",
    "steps-not-integers": "nrlprof.steps is '3-4', expected a list of integers",
    "deeply-nested": "nested more than",
    "deep-header": "nested more than",
}


@pytest.mark.parametrize("kind", sorted(BAD_TRACES))
def test_merge_skips_a_bad_trace_and_merges_the_rest(tmp_path, kind, capsys):
    root = run_dir(tmp_path, BAD_TRACES[kind]())
    output = tmp_path / "timeline.json"
    assert main(["merge", str(root), "-o", str(output), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert [s["path"] for s in result["skipped"]] == [str(root / "policy" / "1" / BAD)]
    assert REASONS[kind] in result["skipped"][0]["reason"]
    assert result["merged"] == [str(root / "policy" / "0" / GOOD)]
    good_events = gpu_trace()["traceEvents"]
    merged = [e for e in events_of(output) if e.get("cat") in ("cpu_op", "kernel", "user_annotation")]
    assert len(merged) == sum(1 for e in good_events if e.get("cat") in ("cpu_op", "kernel", "user_annotation"))


@pytest.mark.parametrize("kind", sorted(BAD_TRACES))
def test_summary_skips_a_bad_trace_and_summarises_the_rest(tmp_path, kind, capsys):
    root = run_dir(tmp_path, BAD_TRACES[kind]())
    assert main(["summary", str(root), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(s["path"], REASONS[kind] in s["reason"]) for s in data["skipped"]] == [
        (str(root / "policy" / "1" / BAD), True)
    ]
    (rank0,) = data["workers"]
    # gpu_trace: steps 3 and 4 of 1 ms each, four 100 us kernels per step
    assert (rank0["worker"], rank0["rank"]) == ("policy", 0)
    cpu_figures = {s: {k: v[k] for k in ("wall_ms", "ranges_ms")} for s, v in rank0["steps"].items()}
    assert cpu_figures == {"3": {"wall_ms": 1.0, "ranges_ms": {}}, "4": {"wall_ms": 1.0, "ranges_ms": {}}}
    assert rank0["steps"]["3"]["gpu_kernel_ms"] == 0.4
    assert {k["name"]: k["total_ms"] for k in rank0["top_kernels"]} == {
        "ampere_sgemm_128x64_nn": 0.4,
        "elementwise_kernel": 0.4,
    }


def test_report_skips_a_bad_trace_and_reports_the_rest(tmp_path, capsys):
    root = run_dir(tmp_path, with_events(7))
    output = tmp_path / "report.html"
    assert main(["report", str(root), "-o", str(output)]) == 1
    assert f"skipped {root / 'policy' / '1' / BAD}" in capsys.readouterr().err
    page = output.read_text()
    assert "policy rank 0" in page and "ampere_sgemm_128x64_nn" in page and "not a JSON object" in page


def test_every_input_skipped_is_exit_1_with_each_reason_not_bad_input(tmp_path, capsys):
    root = tmp_path / "run"
    write_json(root / "policy" / "1" / BAD, with_events(5))
    (root / "policy" / "0").mkdir()
    (root / "policy" / "0" / GOOD).write_bytes(b'{"traceEvents": [{"ph": "X"')
    assert main(["summary", str(root), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["workers"] == [] and len(data["skipped"]) == 2
    assert main(["report", str(root), "-o", str(tmp_path / "report.html")]) == 1
    assert "not a JSON object" in (tmp_path / "report.html").read_text()
    summary_file = tmp_path / "summary.json"
    summary_file.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["diff", str(summary_file), str(summary_file), "--json"]) == 1
    assert "run A skipped 2 input(s)" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["summary", str(tmp_path / "empty")]) == 2  # nothing to summarise at all: bad input
    assert "no torch trace or Nsight Systems report found" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["ProfilerStep#²", "ProfilerStep#", "ProfilerStep#3.5", "ProfilerStep#" + "9" * 5000])
def test_a_step_annotation_without_a_step_number(tmp_path, name, capsys):
    bad = with_events({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1001, "tid": 1001,
                       "ts": 1_000_000.0, "dur": 5.0, "args": {}})  # fmt: skip
    root = run_dir(tmp_path, bad)
    assert main(["summary", str(root), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    (skipped,) = data["skipped"]
    assert skipped["path"] == str(root / "policy" / "1" / BAD)
    assert "expected ProfilerStep#<n>" in skipped["reason"] and name[:30] in skipped["reason"]
    assert [(w["worker"], w["rank"]) for w in data["workers"]] == [("policy", 0)]
    # merge does not read step numbers: both traces merge
    assert main(["merge", str(root), "-o", str(tmp_path / "timeline.json")]) == 0


def test_events_with_values_of_unexpected_types(tmp_path, capsys):
    odd = [
        {"ph": "X", "cat": "cpu_op", "name": "odd-pid", "pid": [1], "tid": {"a": 1}, "ts": 1.0, "dur": 2.0},
        {"ph": "X", "cat": ["cpu_op"], "name": {"n": 1}, "pid": 1001, "ts": "1", "dur": None},
        {"ph": "X", "cat": "kernel", "name": None, "pid": 1001, "ts": 1e300, "dur": 1e300},
        {"ph": "M", "name": "process_name", "pid": {"x": [1]}, "args": "not a dict", "id": [1, 2]},
    ]
    root = run_dir(tmp_path, with_events(*odd))
    # merge keeps every event, whatever its values
    result = merge_traces([root], tmp_path / "timeline.json")
    assert len(result.merged) == 2 and not result.skipped
    # summary: the trace with values of types no profiler writes is skipped, with its reason; the other is read
    summary = summarize(root, nsys="")
    assert [(w.worker, w.rank) for w in summary.workers] == [("policy", 0)]
    ((skipped, reason),) = summary.skipped
    assert skipped.name.startswith("policy.rank1.") and reason.startswith("unexpected content"), reason


def test_a_kernel_of_1e300_us_is_not_counted_and_the_rest_of_its_trace_is(tmp_path):
    """A duration no profiler writes, on a kernel inside the window of a trace summary reads."""
    trace = rank1_trace()
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    trace["traceEvents"].append({**kernel, "name": "not a profiler's", "dur": 1e300})
    summary = summarize(run_dir(tmp_path, trace), nsys="")
    assert not summary.skipped
    kernels = {(w.worker, w.rank): sorted((k.name, k.total_us) for k in w.kernels) for w in summary.workers}
    assert list(kernels) == [("policy", 0), ("policy", 1)]
    assert kernels[("policy", 1)] == kernels[("policy", 0)] != [], "rank 1 is rank 0's fixture, that kernel left out"


def test_manifests_that_cannot_be_read_are_skipped_with_a_reason(tmp_path, capsys):
    root = run_dir(tmp_path, rank1_trace())
    manifests = root / ".nrlprof"
    manifests.mkdir()
    good_line = json.dumps({"backend": "torch", "worker": "policy", "rank": 1, "status": "error", "message": "m1"})
    (manifests / "manifest-h-1.jsonl").write_bytes(b'{"worker": "\xff\xfe"}\n' + good_line.encode() + b"\n")
    record = {"backend": "torch", "worker": "policy", "rank": 1, "window": "3-4", "status": "ok", "host": "h",
              "pid": 1001, "files": 5}  # fmt: skip
    ok = {**record, "rank": 0, "files": [f"/remote/{GOOD}"], "status": "error", "message": "export failed"}
    (manifests / "manifest-h-2.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(ok) + "\n")
    (manifests / "manifest-h-3.jsonl").mkdir()  # a directory named like a manifest: not a manifest
    assert main(["summary", str(root), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    reasons = {Path(s["path"]).name: s["reason"] for s in data["skipped"]}
    assert reasons == {
        "manifest-h-1.jsonl": "1 line(s) not UTF-8 text, skipped",
        "manifest-h-2.jsonl": "record of policy: files is 5, expected a list of paths",
    }
    # the readable records of the same manifests still give their notes, and both traces are summarised
    assert any("export failed" in note for note in data["notes"]) and any("m1" in note for note in data["notes"])
    assert sorted(w["rank"] for w in data["workers"]) == [0, 1]
    assert main(["report", str(root), "-o", str(tmp_path / "r.html")]) == 1


def test_deeply_nested_trace_is_read_in_memory_bounded_by_its_size(tmp_path):
    """The fallback parser's memory grows with the square of the depth; the file is refused first.

    Peak traced memory of merge + summary with the deep file, against the same with the good file alone
    (merge's 1 MiB write buffers and the good trace's events are in both).
    """
    good = run_dir(tmp_path / "good", rank1_trace())
    (good / "policy" / "1" / BAD).unlink()
    root = run_dir(tmp_path, deeply_nested())
    size = (root / "policy" / "1" / BAD).stat().st_size
    figures = {}
    for name, directory in (("good", good), ("deep", root)):
        command = [sys.executable, str(PEAK_PROGRAM), str(directory), str(tmp_path / f"{name}.json")]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        figures[name] = json.loads(done.stdout)
    assert figures["good"]["skipped"] == []
    assert len(figures["deep"]["skipped"]) == 2 and all("nested more than" in r for r in figures["deep"]["skipped"])
    extra = figures["deep"]["peak"] - figures["good"]["peak"]
    assert extra < 8 * size, f"{extra} bytes more at the peak for a {size}-byte file"


def test_reader_falls_back_without_giving_an_event_twice(tmp_path, monkeypatch):
    """A slice orjson refuses (a lone surrogate) late in a kineto-laid-out file: ijson reads on from there."""
    trace = gpu_trace()
    trace["traceEvents"][-1]["args"] = {"note": "\ud800"}  # json.dumps writes it as an escape, orjson refuses it
    path = tmp_path / GOOD
    path.write_text(kineto_text(trace))
    monkeypatch.setattr(traces, "_CHUNK", 512)  # several batches before the bad one
    fallbacks = []
    original = traces._ijson_batches
    monkeypatch.setattr(traces, "_ijson_batches", lambda *a, **k: fallbacks.append(k["skip"]) or original(*a, **k))
    batches = list(iter_event_batches(path))
    expected = [(e.get("ph"), e.get("name"), e.get("ts")) for e in load(path)["traceEvents"]]
    assert [(e.get("ph"), e.get("name"), e.get("ts")) for b in batches for e in b] == expected
    assert len(fallbacks) == 1 and 0 < fallbacks[0] < len(expected)


def test_merge_and_summary_turn_the_garbage_collector_back_on(tmp_path):
    root = run_dir(tmp_path, rank1_trace())
    assert gc.isenabled()
    merge_traces([root], tmp_path / "timeline.json", jobs=1)
    assert gc.isenabled()
    summarize(root, nsys="")
    assert gc.isenabled()
    gc.disable()
    try:
        merge_traces([root], tmp_path / "again.json", jobs=1)
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_a_named_file_without_trace_events_is_reported(tmp_path):
    root = run_dir(tmp_path, rank1_trace())
    named = tmp_path / "settings.json"
    named.write_text('{"schemaVersion": 1, "events": []}')
    (root / "other.json").write_text('{"schemaVersion": 1}')  # found in a directory, not named like a trace
    no_events = root / "policy" / "2" / "policy.rank2.steps3-4.1002.pt.trace.json"
    no_events.parent.mkdir()
    no_events.write_text('{"schemaVersion": 1}')
    found, unreadable = find_traces([root, named])
    assert sorted(h.path.name for h in found) == [GOOD, BAD]
    assert unreadable == [
        (no_events, "not a Chrome trace: no traceEvents"),
        (named, "not a Chrome trace: no traceEvents"),
    ]


@pytest.mark.parametrize(
    "content, reason",
    [(b"[1, 2]", "not a JSON object: 1"), (b"[" * DEPTH + b"]" * DEPTH, "nested more than")],
    ids=["events-not-objects", "deeply-nested"],
)
def test_a_bad_ray_timeline_is_bad_input_and_nothing_is_written(tmp_path, capsys, content, reason):
    root = run_dir(tmp_path, rank1_trace())
    timeline = tmp_path / "ray.json"
    timeline.write_bytes(content)
    output = tmp_path / "timeline.json"
    assert main(["merge", str(root), "-o", str(output), "--ray-timeline", str(timeline)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nrlprof merge: {timeline}: ") and reason in err and err.count("\n") == 1
    assert not output.exists() and not list(tmp_path.glob(".*.tmp"))
