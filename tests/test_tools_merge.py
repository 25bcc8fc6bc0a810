"""nrlprof.tools.merge: every event kept, clocks rebased, processes named, ids distinct, bad inputs refused.

Traces come from the real torch profiler on CPU (kineto's own text layout); GPU-shaped traces, which a
CPU-only machine cannot record, are built by hand with kineto's event shapes (both in helpers/traces.py).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import zlib
from collections import Counter
from pathlib import Path

import pytest
from helpers.traces import events_of, gpu_trace, load, record_cpu_trace, truncate, write_json

from nrlprof.cli import main
from nrlprof.errors import ToolError
from nrlprof.tools.merge.gzip_member import crc32_combine
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.read.traces import iter_event_batches, read_header


def shift_clock(source: Path, target: Path, shift_ns: int) -> Path:
    """The same trace on a clock whose base is `shift_ns` later: same instants, kineto's layout kept."""
    text = source.read_text()
    base = int(re.search(r'"baseTimeNanoseconds": (\d+)', text).group(1))
    text = text.replace(f'"baseTimeNanoseconds": {base}', f'"baseTimeNanoseconds": {base + shift_ns}')
    text = re.sub(r'"ts": ([0-9.]+)', lambda m: f'"ts": {float(m.group(1)) - shift_ns / 1000:.3f}', text)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def fingerprint(event: dict) -> tuple:
    return (event.get("ph"), event.get("cat"), event.get("name"), event.get("dur"), event.get("tid"))


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory) -> Path:
    """An nrlprof run directory: two policy ranks, a gzipped generation rank, the controller."""
    root = tmp_path_factory.mktemp("cpu_run")
    pid = os.getpid()
    record_cpu_trace(root / "policy" / "0" / f"policy.rank0.steps3-4.{pid}.pt.trace.json", "policy", 0)
    record_cpu_trace(root / "policy" / "1" / f"policy.rank1.steps3-4.{pid + 1}.pt.trace.json", "policy", 1)
    gen = root / "generation" / "0" / f"generation.rank0.steps3.{pid}.pt.trace.json.gz"
    record_cpu_trace(gen, "generation", 0, steps=(3,), host="node-b")
    record_cpu_trace(root / f"controller.steps3-4.{pid}.pt.trace.json", "controller", None, step_sleep_s=0.01)
    (root / "manifest-node-a-1.jsonl").write_text('{"backend": "torch"}\n')
    return root


def trace_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith((".pt.trace.json", ".pt.trace.json.gz")))


def copy_run(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("jobs", [1, 3])
def test_merge_keeps_every_event(cpu_run, tmp_path, jobs):
    output = tmp_path / "timeline.json"
    result = merge_traces([cpu_run], output, jobs=jobs)
    assert result.jobs == jobs
    inputs = trace_files(cpu_run)
    assert sorted(result.merged) == inputs and not result.skipped
    expected = Counter(fingerprint(e) for path in inputs for e in events_of(path))
    out = events_of(output)
    assert result.events_in == sum(expected.values())
    assert len(out) == result.events_out == result.events_in + result.events_added
    added = [e for e in out if e.get("ph") == "M" and e.get("name") == "process_name" and e.get("tid") == 0]
    assert Counter(fingerprint(e) for e in out) - Counter(fingerprint(e) for e in added) == expected - Counter(
        fingerprint(e) for e in added
    )
    assert all(isinstance(e["pid"], int) for e in out if "pid" in e)
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_merged_file_is_byte_for_byte_the_same_whatever_the_processes_that_wrote_it(cpu_run, tmp_path):
    output = tmp_path / "timeline.json"  # one path: the file names itself
    written = []
    for jobs in (1, 3, 1):
        assert merge_traces([cpu_run], output, jobs=jobs, force=True).jobs == jobs
        written.append(output.read_bytes())
    assert written[0] == written[1] == written[2]


def test_merge_names_processes(cpu_run, tmp_path):
    result = merge_traces([cpu_run], tmp_path / "timeline.json")
    names = {
        e["args"]["name"]
        for e in events_of(tmp_path / "timeline.json")
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    assert {"policy rank 0 (node-a)", "policy rank 1 (node-a)", "generation rank 0 (node-b)",
            "controller (node-a)"} <= names  # fmt: skip
    assert set(result.processes.values()) == names
    # kineto's string pids ("Spans", "Traces") become their own numbered processes of the same worker
    assert "policy rank 0 (node-a) [Spans]" in names
    sort_index = [e for e in events_of(tmp_path / "timeline.json") if e.get("name") == "process_sort_index"]
    assert all(e["args"]["sort_index"] == e["pid"] for e in sort_index)


def test_merge_rebases_timestamps_onto_earliest_base(cpu_run, tmp_path):
    source = trace_files(cpu_run / "policy" / "0")[0]
    early = tmp_path / "in" / "a" / source.name
    early.parent.mkdir(parents=True)
    shutil.copy(source, early)
    later = shift_clock(source, tmp_path / "in" / "b" / source.name.replace(".pt.", ".1.pt."), 5_000_000_000)
    header = read_header(later)
    assert header.base_time_ns == read_header(early).base_time_ns + 5_000_000_000
    output = tmp_path / "timeline.json"
    merge_traces([tmp_path / "in"], output)
    merged = load(output)
    assert merged["baseTimeNanoseconds"] == read_header(early).base_time_ns
    steps = [e for e in merged["traceEvents"] if e.get("name") == "ProfilerStep#3"]
    assert len(steps) == 2
    assert steps[0]["ts"] == pytest.approx(steps[1]["ts"], abs=0.01)
    original = next(e for e in events_of(early) if e.get("name") == "ProfilerStep#3")
    assert steps[0]["ts"] == pytest.approx(original["ts"], abs=0.01)


def test_merge_keeps_flow_and_correlation_ids_distinct(tmp_path):
    for rank in (0, 1):
        write_json(
            tmp_path / "in" / f"policy.rank{rank}.steps3-4.{1000 + rank}.pt.trace.json", gpu_trace(rank, 1000 + rank)
        )
    output = tmp_path / "timeline.json"
    merge_traces([tmp_path / "in"], output)
    events = events_of(output)
    flows = Counter((e["ph"], e["id"]) for e in events if e.get("ph") in ("s", "f"))
    assert len(flows) == 2 * 2 * 8 and set(flows.values()) == {1}
    for rank_pid in {e["pid"] for e in events if e.get("cat") == "cpu_op"}:
        launches = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime" and e["pid"] == rank_pid}
        assert len(launches) == 8
    runtime = Counter(e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime")
    kernels = Counter(e["args"]["correlation"] for e in events if e.get("cat") == "kernel")
    assert runtime == kernels and set(runtime.values()) == {1}
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    for kernel in (e for e in events if e.get("cat") == "kernel"):
        assert starts[kernel["args"]["correlation"]]["ts"] == kernel["ts"] - 35


def test_merge_handles_string_pids_and_string_ids(tmp_path):
    trace = gpu_trace()
    for event in trace["traceEvents"]:
        if event["pid"] == 1000:
            event["pid"] = "python worker"
        if "id" in event:
            event["id"] = f"0x{event['id']:x}"
    write_json(tmp_path / "in" / "policy.rank0.steps3-4.1000.pt.trace.json", trace)
    write_json(tmp_path / "in" / "policy.rank1.steps3-4.1001.pt.trace.json", trace | {"nrlprof": {
        **trace["nrlprof"], "rank": 1, "pid": 1001}})  # fmt: skip
    output = tmp_path / "timeline.json"
    result = merge_traces([tmp_path / "in"], output)
    events = events_of(output)
    assert all(isinstance(e["pid"], int) for e in events)
    assert "policy rank 1 (gpu-node) [python worker]" in result.processes.values()
    ids = Counter(e["id"] for e in events if e.get("ph") == "s")
    assert len(ids) == 16 and set(ids.values()) == {1}


def test_ids_outside_the_stride_become_prefixed_strings(tmp_path):
    trace = gpu_trace()
    trace["traceEvents"] += [
        {"ph": "X", "cat": "cpu_op", "name": "big", "pid": 1000, "tid": 1, "ts": 1.0, "dur": 1.0,
         "args": {"External id": 2**50, "correlation": -3}},
    ]  # fmt: skip
    for rank in (0, 1):
        write_json(tmp_path / "in" / f"policy.rank{rank}.steps3-4.{1000 + rank}.pt.trace.json", trace)
    events = events_of(merge_traces([tmp_path / "in"], tmp_path / "timeline.json").output)
    big = [(e["args"]["External id"], e["args"]["correlation"]) for e in events if e.get("name") == "big"]
    # still distinct between the two inputs, each keeping its original value readable
    assert len(big) == 2 and len({ext for ext, _ in big}) == 2 and len({corr for _, corr in big}) == 2
    assert all(isinstance(v, str) for pair in big for v in pair)
    assert all(ext.endswith(str(2**50)) and corr.endswith("-3") for ext, corr in big)


@pytest.mark.parametrize("jobs", [1, 2])
def test_merge_gzip_in_and_out(cpu_run, tmp_path, jobs):
    output = tmp_path / "timeline.json.gz"
    result = merge_traces([cpu_run], output, jobs=jobs)
    assert output.read_bytes()[:2] == b"\x1f\x8b"
    merged = load(output)  # gzip checks the CRC and length of the spliced stream
    assert len(merged["traceEvents"]) == result.events_out
    assert merged["nrlprof"]["merged"] is True
    plain = load(merge_traces([cpu_run], tmp_path / "timeline.json", jobs=1).output)
    assert merged["traceEvents"] == plain["traceEvents"]


@pytest.mark.parametrize("length", [0, 1, 2, 3, 7, 8, 255, 256, 1000, 4096, 76_801, (1 << 20) + 5])
def test_crc32_combine_matches_zlib(length):
    first, second = b"x" * 1000 + b"first part", (bytes(range(256)) * (length // 256 + 1))[:length]
    assert crc32_combine(zlib.crc32(first), zlib.crc32(second), length) == zlib.crc32(first + second)


def test_merged_output_is_not_an_input(cpu_run, tmp_path):
    run_dir = copy_run(cpu_run, tmp_path / "run")
    first = merge_traces([run_dir], run_dir / "timeline.json.gz")
    second = merge_traces([run_dir], run_dir / "again.json")
    assert second.events_in == first.events_in
    assert run_dir / "timeline.json.gz" not in second.merged


def test_merge_adds_ray_timeline(cpu_run, tmp_path):
    header = read_header(trace_files(cpu_run / "policy" / "0")[0])
    start_us = header.base_time_ns / 1000 + 1_000_000
    ray_events = [
        {"cat": "task", "name": "policy.train", "pid": 0, "tid": 1, "ts": start_us, "dur": 500.0, "ph": "X",
         "cname": "generic_work", "args": {}},
        {"name": "process_name", "ph": "M", "pid": 0, "tid": None, "args": {"name": "Node 10.0.0.1"}},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "worker:abc"}},
    ]  # fmt: skip
    timeline = tmp_path / "ray.json"
    timeline.write_text(json.dumps(ray_events))
    output = tmp_path / "timeline.json"
    result = merge_traces([cpu_run / "policy"], output, ray_timeline=timeline)
    merged = load(output)
    task = next(e for e in merged["traceEvents"] if e.get("cat") == "task")
    assert task["ts"] + merged["baseTimeNanoseconds"] / 1000 == pytest.approx(start_us, abs=1)
    assert "ray: Node 10.0.0.1" in result.processes.values()
    assert result.events_in == sum(len(events_of(p)) for p in trace_files(cpu_run / "policy")) + 3


def test_fast_reader_and_ijson_reader_agree(cpu_run, tmp_path):
    source = trace_files(cpu_run / "policy" / "0")[0]
    relaid = write_json(tmp_path / "relaid.pt.trace.json", load(source))
    fast = [e for batch in iter_event_batches(source) for e in batch]
    slow = [e for batch in iter_event_batches(relaid) for e in batch]
    assert fast == slow == load(source)["traceEvents"]


@pytest.mark.parametrize("keep, jobs", [(0.6, 1), (0.999, 1), (0.6, 2)])
def test_truncated_trace_is_skipped_and_its_events_dropped(cpu_run, tmp_path, keep, jobs):
    run_dir = copy_run(cpu_run, tmp_path / "run")
    target = run_dir / "policy" / "1" / "policy.rank1.steps9.7.pt.trace.json"
    bad = truncate(trace_files(cpu_run / "policy" / "1")[0], target, keep)
    output = tmp_path / "timeline.json.gz"
    result = merge_traces([run_dir], output, jobs=jobs)
    assert [p for p, _ in result.skipped] == [bad]
    assert "cut short" in result.skipped[0][1]
    good = [p for p in trace_files(run_dir) if p != bad]
    assert sorted(result.merged) == good
    assert len(events_of(output)) == result.events_out == sum(len(events_of(p)) for p in good) + result.events_added
    assert all(isinstance(pid, int) for pid in result.processes)


def test_truncated_gzip_trace_is_skipped(cpu_run, tmp_path):
    run_dir = copy_run(cpu_run / "policy", tmp_path / "run")
    gz = trace_files(cpu_run / "generation")[0]
    bad = truncate(gz, run_dir / "2" / gz.name, 0.5)
    output = tmp_path / "timeline.json.gz"
    result = merge_traces([run_dir], output)
    assert [p for p, _ in result.skipped] == [bad]
    assert len(load(output)["traceEvents"]) == result.events_out


def test_strict_merge_fails_on_first_bad_trace_and_writes_nothing(cpu_run, tmp_path):
    run_dir = copy_run(cpu_run / "policy", tmp_path / "run")
    bad = truncate(trace_files(cpu_run / "policy" / "1")[0], run_dir / "9" / "policy.rank9.steps3.9.pt.trace.json")
    output = tmp_path / "timeline.json.gz"
    with pytest.raises(ToolError, match=re.escape(str(bad))):
        merge_traces([run_dir], output, strict=True)
    assert not output.exists() and not list(tmp_path.glob(".*.tmp"))


def test_non_json_trace_is_skipped_with_its_name(cpu_run, tmp_path):
    run_dir = copy_run(cpu_run / "policy", tmp_path / "run")
    bad = run_dir / "0" / "policy.rank0.steps7.1.pt.trace.json"
    bad.write_text("this is not json\n")
    (run_dir / "notes.json").write_text("not a trace either, but not named like one: ignored")
    result = merge_traces([run_dir], tmp_path / "timeline.json")
    assert result.skipped == [(bad, result.skipped[0][1])]
    assert "not valid JSON" in result.skipped[0][1]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty file"),
        (b" \n\t\n", "empty file"),
        (gzip.compress(b""), "empty file"),
        (b'{"traceEvents": [{"ph": "X"', "cut short"),
        (b'{"traceEvents": [{"ph": "X"}', "cut short"),
        (b"\x1f\x8bnot gzip", "gzip"),
        (b"[1, 2]", "not a Chrome trace"),
    ],
    ids=["empty-file", "white-space", "empty-gzip", "cut-in-event", "cut-after-event", "bad-gzip", "not-an-object"],
)
def test_an_unusable_input_is_skipped_even_when_it_is_the_only_one(tmp_path, capsys, content, message):
    target = tmp_path / "in" / "x.pt.trace.json"
    target.parent.mkdir()
    target.write_bytes(content)
    output = tmp_path / "timeline.json"
    result = merge_traces([target.parent], output)
    assert result.merged == [] and [p for p, _ in result.skipped] == [target]
    assert re.search(message, result.skipped[0][1])
    assert load(output)["traceEvents"] == [] and not list(tmp_path.glob(".*.tmp"))
    assert main(["merge", str(target), "-o", str(output)]) == 1  # every input skipped: exit 1, not 2
    assert f"skipped {target}" in capsys.readouterr().err


def test_a_missing_input_raises_and_leaves_no_output(tmp_path):
    output = tmp_path / "timeline.json.gz"
    with pytest.raises(ToolError, match="no such file or directory") as raised:
        merge_traces([tmp_path / "in" / "x.pt.trace.json"], output)
    assert str(tmp_path / "in" / "x.pt.trace.json") in str(raised.value)
    assert not output.exists() and not list(tmp_path.glob(".*.tmp"))


def test_empty_directory_raises(tmp_path):
    (tmp_path / "in").mkdir()
    with pytest.raises(ToolError, match="nothing to merge"):
        merge_traces([tmp_path / "in"], tmp_path / "timeline.json")
    assert not (tmp_path / "timeline.json").exists()


def test_cli_exit_codes(cpu_run, tmp_path, capsys):
    assert main(["merge", str(cpu_run / "policy"), "-o", str(tmp_path / "a.json.gz")]) == 0
    run_dir = copy_run(cpu_run / "policy", tmp_path / "run")
    truncate(trace_files(cpu_run / "policy" / "1")[0], run_dir / "9" / "policy.rank9.steps3.9.pt.trace.json")
    assert main(["merge", str(run_dir), "-o", str(tmp_path / "b.json"), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out[out.index("{") :])["skipped"] and "skipped" in err
    assert main(["merge", str(tmp_path / "nothing"), "-o", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err == f"nrlprof merge: {tmp_path / 'nothing'}: no such file or directory\n"
    assert not (tmp_path / "c.json").exists()


def test_progress_reaches_the_total(cpu_run, tmp_path):
    seen: list[tuple[int, int]] = []
    merge_traces([cpu_run], tmp_path / "timeline.json", progress=lambda done, total: seen.append((done, total)))
    total = sum(p.stat().st_size for p in trace_files(cpu_run))
    assert seen and seen[-1] == (total, total)
    assert all(t == total and 0 <= d <= total for d, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


@pytest.mark.parametrize(
    "name, worker, rank, window, pid",
    [
        ("dtensor_policy_worker.rank0.steps3-4_10.1234.pt.trace.json.gz", "dtensor_policy_worker", 0, "3-4_10", 1234),
        ("policy.rank2.step3.train.77.1.pt.trace.json", "policy", 2, "3", 77),
        ("controller.steps3-4.99.2.pt.trace.json", "controller", None, "3-4", 99),
    ],
)
def test_identity_from_the_file_name_when_the_trace_has_no_nrlprof_block(tmp_path, name, worker, rank, window, pid):
    trace = gpu_trace()
    del trace["nrlprof"], trace["distributedInfo"]
    header = read_header(write_json(tmp_path / name, trace))
    assert (header.worker, header.rank, header.window, header.pid) == (worker, rank, window, pid)
    assert header.is_controller == (worker == "controller")


@pytest.mark.parametrize("chunk", [64, 97, 4096])
def test_fast_reader_splits_at_any_chunk_boundary(cpu_run, monkeypatch, chunk):
    from nrlprof.tools.read import traces

    source = trace_files(cpu_run / "policy" / "0")[0]
    monkeypatch.setattr(traces, "_CHUNK", chunk)
    monkeypatch.setattr(traces, "_ijson_batches", lambda *a, **k: pytest.fail("fell back to ijson"))
    events = [e for batch in iter_event_batches(source) for e in batch]
    assert events == load(source)["traceEvents"]


def test_strict_parallel_merge_cleans_up(cpu_run, tmp_path):
    run_dir = copy_run(cpu_run, tmp_path / "run")
    truncate(trace_files(cpu_run / "policy" / "1")[0], run_dir / "policy" / "1" / "policy.rank1.steps9.7.pt.trace.json")
    with pytest.raises(ToolError, match="cut short"):
        merge_traces([run_dir], tmp_path / "timeline.json.gz", strict=True, jobs=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
