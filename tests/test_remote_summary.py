"""`summary`, `report` and `diff` read where the files live, on a real 3-node Ray cluster (three raylets here).

Each node holds its own part of one job: torch traces under a trace dir that manifests name, manifests and
stand-in nsys reports in its session dir, memory figures; one node holds a trace that cannot be read. Every node
has the nsys stand-in on its PATH and this process has none: a capture in the summary was exported on its node.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers.memory import host_steps, write_figures
from helpers.trace_reading import load_trace
from helpers.traces import gpu_step_trace
from nsys_standin.report import FORMAT as STANDIN_FORMAT

from nrlprof.cli import main
from nrlprof.errors import ToolError
from nrlprof.manifest import WindowRecord, append_record
from nrlprof.tools.cluster import BadInput, alive_nodes
from nrlprof.tools.collect.collector import collect
from nrlprof.tools.commands import diff as diff_command
from nrlprof.tools.commands import report as report_command
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.merge.select import Selection
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.remote.job import ClusterJob
from nrlprof.tools.remote.merge import merge_on_cluster
from nrlprof.tools.remote.node_work import NICE
from nrlprof.tools.remote.summary import summarize_cluster

BAD_TRACE = "policy.rank9.steps3-4.999.pt.trace.json"


def standin_report(pid: int, worker: str, steps: tuple[int, ...] = (3, 4)) -> dict:
    """An nsys stand-in report: nrlprof's `step <n>` NVTX ranges and one annotated range per step."""
    origin, ranges = 5_000_000, []
    for index, step in enumerate(steps):
        start = origin + index * 20_000_000
        ranges.append({"domain": "nrlprof", "message": f"step {step}", "kind": "start_end", "start_ns": start,
                       "end_ns": start + 15_000_000, "pid": pid, "tid": pid, "end_tid": pid})  # fmt: skip
        ranges.append({"domain": "nrlprof", "message": f"{worker}.generate [step {step}]", "kind": "push_pop",
                       "start_ns": start + 1_000_000, "end_ns": start + 9_000_000, "pid": pid, "tid": pid,
                       "end_tid": pid})  # fmt: skip
    return {"format": STANDIN_FORMAT, "name": f"{worker}_3-4_{pid}", "range_index": None, "launched_pid": pid,
            "command": ["python"], "session_start_ns": origin, "session_start_utc_ns": 1_790_000_000_000_000_000,
            "nvtx_domains": [{"name": "nrlprof", "pid": pid, "t": origin}], "nvtx_ranges": ranges,
            "nvtx_marks": []}  # fmt: skip


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def plant_node(temp_dir: Path, base: Path, index: int) -> None:
    """Node `index`'s part of the job: policy rank `index` (a torch trace), a generation worker's nsys report."""
    session = next(p for p in temp_dir.glob("session_2*") if not p.is_symlink())
    trace_dir = base / f"node{index}" / "trace"
    pid = 1000 + index
    trace = trace_dir / "policy" / str(index) / f"policy.rank{index}.steps3-4.{pid}.pt.trace.json"
    put(trace, json.dumps(gpu_step_trace(rank=index, pid=pid, step3_us=1000.0 + 250 * index)))
    report = put(session / "logs" / "nsight" / f"generation_3-4_{2000 + index}.nsys-rep",
                 json.dumps(standin_report(2000 + index, "generation")))  # fmt: skip
    memory = write_figures(base / f"node{index}" / "memory", "policy", index, host_steps([900.0, 950.0]), pid=pid)
    manifests = session / "logs" / "nrlprof"
    for backend, files, rank in (("torch", [trace], index), ("nsys", [report], index), ("memory", [memory], index)):
        record = WindowRecord(backend, "policy" if backend != "nsys" else "generation", rank, [3, 4], "3-4",
                              files=[str(f) for f in files], start_ms=10.0 + index, stop_ms=20.0 + index)  # fmt: skip
        append_record(manifests, record)
    if index == 1:
        bad = put(trace_dir / "policy" / "9" / BAD_TRACE, '{"traceEvents": [{"ph": "X", "name": ')
        append_record(manifests, WindowRecord("torch", "policy", 9, [3, 4], "3-4", files=[str(bad)]))


@pytest.fixture(scope="module")
def job(on_multi_node, tmp_path_factory):
    """The shared three-node cluster (nsys stand-in on its nodes' PATH), node `index`'s part of the job planted on
    each; torch traces and memory figures under this module's `base`."""
    base = tmp_path_factory.mktemp("job")
    labels = {n.node_id: n.label for n in alive_nodes()}
    nodes = [on_multi_node.head, *on_multi_node.workers]
    for index, node_id in enumerate(nodes):
        plant_node(on_multi_node.temp_dirs[node_id], base, index)
    return {
        "multi": on_multi_node,
        "base": base,
        "labels": [labels[n] for n in nodes],
        "address": on_multi_node.address,
    }


def without_paths(data: dict) -> dict:
    """A summary's JSON with every path reduced to its file name (and no `directory`)."""
    text = json.dumps({k: v for k, v in data.items() if k != "directory"})
    return json.loads(re.sub(r'(?<=")[^"\s]*/([^"/\s]+)(?=["\s:])', r"\1", text))


@pytest.fixture(scope="module")
def collected(job, tmp_path_factory, stand_in_env):
    """The job collected, then summarised here with the nsys stand-in named (this process has none on PATH)."""
    to = tmp_path_factory.mktemp("collected")
    result = collect(to, allow_dirs=[str(job["base"])])
    assert result.ok, result.to_json()
    return summarize(to, nsys=str(stand_in_env["bin"] / "nsys")).to_json()


@pytest.fixture(scope="module")
def on_the_nodes(job):
    seen = []
    summary, reading = summarize_cluster(
        ClusterJob(allow_dirs=(str(job["base"]),)),
        progress=lambda done, total, files: seen.append((done, total, files)),
    )
    return summary.to_json(), reading, seen


def test_summary_read_on_the_nodes_is_the_summary_of_the_collected_files(collected, on_the_nodes):
    assert shutil.which("nsys") is None  # the captures below were exported on their nodes
    data, _, _ = on_the_nodes
    assert without_paths(data) == without_paths(collected)
    assert {w["source"] for w in data["workers"]} == {"torch", "nsys"}
    captures = [w for w in data["workers"] if w["source"] == "nsys"]
    assert sorted(w["rank"] for w in captures) == [0, 1, 2] and all(set(w["steps"]) == {"3", "4"} for w in captures)
    assert len(data["profiler_overhead"]) == 9 and data["memory"]["workers"]["policy"].keys() == {"0", "1", "2"}


def test_every_path_names_its_node(job, on_the_nodes):
    data, reading, _ = on_the_nodes
    labels = job["labels"]
    assert data["directory"].startswith("cluster auto: session_")
    files = {w["rank"]: w["files"][0] for w in data["workers"] if w["source"] == "torch"}
    for index, label in enumerate(labels):
        assert files[index] == f"{label}:{job['base']}/node{index}/trace/policy/{index}/" + Path(files[index]).name
    assert {label for label in reading.readers} == set(labels)


def test_a_bad_trace_on_one_node_is_skipped_with_its_node_and_the_rest_summarised(job, on_the_nodes):
    data, _, _ = on_the_nodes
    [skipped] = data["skipped"]
    assert skipped["path"] == f"{job['labels'][1]}:{job['base']}/node1/trace/policy/9/{BAD_TRACE}"
    assert "not valid JSON" in skipped["reason"]
    assert sorted(w["rank"] for w in data["workers"] if w["source"] == "torch") == [0, 1, 2]


def test_reading_is_polite_and_counts_files_and_bytes(on_the_nodes):
    _, reading, seen = on_the_nodes
    assert reading.nice and min(reading.nice) >= NICE
    assert all(len(set(pids)) == 1 for pids in reading.readers.values())  # --jobs-per-node 1
    assert seen[-1] == (reading.bytes_listed, reading.bytes_listed, (reading.files, reading.files))
    assert reading.bytes_received > 0 and not reading.node_errors


def test_jobs_per_node_reads_with_that_many_processes_at_most(job):
    summary, reading = summarize_cluster(ClusterJob(allow_dirs=(str(job["base"]),), jobs_per_node=2))
    assert all(1 <= len(set(pids)) <= 2 for pids in reading.readers.values())
    assert len(summary.workers) == 6 and not reading.node_errors


def cli_args(job, **options) -> argparse.Namespace:
    values = {"directory": None, "address": job["address"], "session": None, "all_sessions": False,
              "allow_dir": [str(job["base"])], "jobs_per_node": 1, "anatomy": None, "jobs": None,
              "json": True}  # fmt: skip
    return argparse.Namespace(**{**values, **options})


def test_report_from_a_cluster_address(job, tmp_path, capsys):
    output = tmp_path / "report.html"
    assert report_command.run(cli_args(job, output=output)) == 1  # the bad trace: done in part
    page = output.read_text()
    assert "generation" in page and "policy rank 2" in page
    assert f"skipped {job['labels'][1]}:" in capsys.readouterr().err


def test_diff_of_a_summary_file_against_a_cluster_address(job, on_the_nodes, tmp_path, capsys):
    saved = tmp_path / "before.json"
    saved.write_text(json.dumps(on_the_nodes[0]))
    args = argparse.Namespace(a=str(saved), b=job["address"], json=True, session=None, all_sessions=False,
                              allow_dir=[str(job["base"])], jobs_per_node=1)  # fmt: skip
    assert diff_command.run(args) == 1  # both runs skipped the bad trace
    result = json.loads(capsys.readouterr().out)
    assert result["b"] == job["address"] and not result["only_in_a"] and not result["only_in_b"]
    assert len(result["rows"]) == 12 and all(f["change"] == 0 for r in result["rows"] for f in r["figures"].values())


def test_directory_and_address_together_are_bad_input(tmp_path, capsys):
    assert main(["summary", str(tmp_path), "--address", "auto"]) == 2
    assert "expected a DIRECTORY or --address ADDRESS, not both" in capsys.readouterr().err
    assert main(["summary", str(tmp_path), "--session", "session_x"]) == 2
    assert "--session chooses files on a cluster: it needs --address" in capsys.readouterr().err
    assert main(["summary", "--address", "auto", "--hta"]) == 2
    with pytest.raises(SystemExit) as exited:  # argparse's own usage error
        main(["summary", "--address", "auto", "--jobs-per-node", "0"])
    assert exited.value.code == 2
    for command in (["summary", str(tmp_path)], ["merge", str(tmp_path), "-o", str(tmp_path / "t.json")]):
        assert main([*command, "--anatomy", str(tmp_path)]) == 2  # was ignored without a word
        assert "--anatomy is for reading with --address" in capsys.readouterr().err


def test_the_job_on_a_cluster_is_checked_before_any_cluster_is_joined(tmp_path):
    with pytest.raises(BadInput, match="--jobs-per-node 0 is not a positive number"):
        ClusterJob(jobs_per_node=0)
    with pytest.raises(BadInput, match="--session and --all-sessions exclude each other"):
        ClusterJob(session="session_x", all_sessions=True)
    with pytest.raises(BadInput, match="--allow-dir '/' is not allowed"):
        ClusterJob(allow_dirs=("/",))
    with pytest.raises(ToolError, match="no step-anatomy run found here"):
        merge_on_cluster(ClusterJob(address="127.0.0.1:1", anatomy_dir=tmp_path), tmp_path / "t.json")


def test_merge_cuts_the_chosen_events_on_the_nodes_as_a_local_merge_does(job, tmp_path, capsys):
    output, local = tmp_path / "cluster.json.gz", tmp_path / "local.json"
    argv = ["merge", "--address", job["address"], "--allow-dir", str(job["base"]), "-o", str(output), "--json",
            "--workers", "policy", "--ranks", "0,2", "--steps", "3"]  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr()
    data = json.loads(said.out)
    assert "of chosen events came from the nodes" in said.err
    assert [Path(p).name for p in data["merged"]] == ["policy.rank0.steps3-4.1000.pt.trace.json",
                                                      "policy.rank2.steps3-4.1002.pt.trace.json"]  # fmt: skip
    assert data["merged"][1].startswith(f"{job['labels'][2]}:")
    steps = [e for e in load_trace(output)["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#")]
    assert {e["name"] for e in steps} == {"ProfilerStep#3", "ProfilerStep#4"}  # rank 2's step 3 meets its step 4
    assert sum(e["name"] == "ProfilerStep#3" for e in steps) == 2
    collected = tmp_path / "collected"
    collect(collected, allow_dirs=[str(job["base"])])
    selection = Selection(("policy",), frozenset({0, 2}), ((3, 3),))
    here = merge_traces([collected], local, selection=selection)
    assert here.events_out == data["events_out"]
    assert load_trace(local)["traceEvents"] == load_trace(output)["traceEvents"]


def test_plan_sizes_later_windows_at_the_rate_of_those_written(job, monkeypatch, capsys):
    for name in [n for n in os.environ if n.startswith("NRL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("NRL_TORCH_PROFILE_WORKER_PATTERNS", "pol*")
    monkeypatch.setenv("NRL_TORCH_PROFILE_STEP_RANGE", "5:9,12")
    assert main(["plan", "--address", job["address"], "--json"]) == 0
    sizes = json.loads(capsys.readouterr().out)["expected_sizes"]
    traces = sorted(job["base"].glob("node*/trace/**/*.pt.trace.json"))
    per_step = sum(p.stat().st_size for p in traces) / (2 * len(traces))  # every trace: one process, steps 3-4
    assert [(s["worker"], s["window"], s["from_windows"]) for s in sizes] == [("policy", "5-8", ["3-4"]),
                                                                               ("policy", "12", ["3-4"])]  # fmt: skip
    assert sizes[0]["bytes_per_rank"] == round(4 * per_step) and sizes[1]["bytes_per_rank"] == round(per_step)


def test_the_step_anatomy_named_with_anatomy_joins_the_summary_and_the_timeline_read_on_the_nodes(job, tmp_path):
    """The driver wrote the step anatomy here; `--anatomy DIR` brings it beside the files read on the nodes."""
    from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines

    run = tmp_path / "anatomy" / "run-20260101T000000Z-1"
    run.mkdir(parents=True)
    actor, t0 = "00" * 12 + "01000000", 1_700_000_000 * 10**9
    append_lines(run / META_FILE, [{"job_id": "01000000", "driver_node_id": ""}])
    append_lines(run / ACTORS_FILE, [{"actor_id": actor, "worker": "policy", "rank": 0, "class": "Policy"}])
    append_lines(run / STEPS_FILE, [{"step": 3, "t_ns": t0}, {"finish": True, "t_ns": t0 + 10**9}])
    call = {"task_id": "00" * 8 + actor, "actor_id": actor, "kind": "call", "class": "Policy", "method": "train",
            "start_ns": t0 + 10**6, "end_ns": t0 + 5 * 10**8, "node_id": "", "pid": 1}  # fmt: skip
    append_lines(run / TASKS_FILE, [call])
    chosen = ClusterJob(job["address"], allow_dirs=(str(job["base"]),), anatomy_dir=tmp_path / "anatomy")
    summary, _ = summarize_cluster(chosen)
    [phase] = summary.sections["anatomy"]["steps"]["3"]["phases"]
    assert (phase["worker"], phase["method"], phase["calls"]) == ("policy", "train", 1)
    result, _ = merge_on_cluster(chosen, tmp_path / "timeline.json")
    assert result.anatomy_events > 0
    spans = [
        e for e in load_trace(tmp_path / "timeline.json")["traceEvents"] if e.get("name") == "policy.train [step 3]"
    ]
    assert len(spans) == 1


def test_a_node_removed_mid_summary_is_listed_and_the_rest_summarised(job):
    """A node of this test's own, planted like the others, is removed after the listing."""
    multi = job["multi"]
    victim = multi.add_node()
    plant_node(multi.temp_dirs[victim.node_id], job["base"], 3)
    victim_label = next(n.label for n in alive_nodes() if n.node_id == victim.node_id)

    def remove_node(listings):
        assert victim_label in {listing.node.label for listing in listings}
        multi.cluster.remove_node(victim)

    job_60s = ClusterJob(allow_dirs=(str(job["base"]),), read_timeout_s=60)
    try:
        summary, reading = summarize_cluster(job_60s, after_listing=remove_node)
    finally:
        shutil.rmtree(job["base"] / "node3")  # the module's other tests read the job of the three shared nodes
    [error] = reading.node_errors
    assert error.node == victim_label
    lost = [(str(p), reason) for p, reason in summary.skipped if str(p).startswith(f"{victim_label}:")]
    assert len(lost) == 4 and all(victim_label in reason for _, reason in lost)  # its trace, report, memory, manifest
    assert sorted(w.rank for w in summary.workers if w.source == "torch") == [0, 1, 2]
    assert sorted(w.rank for w in summary.workers if w.source == "nsys") == [0, 1, 2]


def test_explain_from_a_cluster_address_reads_the_traces_on_the_nodes_and_the_anatomy_here(job, tmp_path, capsys):
    from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines

    run = tmp_path / "anatomy" / "run-20260101T000000Z-1"
    run.mkdir(parents=True)
    actor, t0 = "00" * 12 + "01000000", 1_700_000_000 * 10**9
    append_lines(run / META_FILE, [{"job_id": "01000000", "driver_node_id": ""}])
    append_lines(run / ACTORS_FILE, [{"actor_id": actor, "worker": "policy", "rank": 0, "class": "Policy"}])
    append_lines(run / STEPS_FILE, [{"step": 3, "t_ns": t0}, {"finish": True, "t_ns": t0 + 10**9}])
    call = {"actor_id": actor, "kind": "call", "class": "Policy", "method": "update_actor", "start_ns": t0 + 10**6,
            "end_ns": t0 + 8 * 10**8, "node_id": "", "pid": 1}  # fmt: skip
    append_lines(run / TASKS_FILE, [call])
    from nrlprof.tools.commands import explain as explain_command

    status = explain_command.run(cli_args(job, anatomy=tmp_path / "anatomy", steps=None, all=False, phases=None))
    assert status == 1  # the bad trace on node 1: named, the rest explained
    found = json.loads(capsys.readouterr().out)
    kinds = {f["kind"]: f for f in found["findings"]}
    assert kinds["training_bound"]["evidence"]["figures"]["method"] == "policy.update_actor"
    # Each policy rank's NCCL kernel (read on its node) runs with no compute under it: 100 of 560 us busy.
    assert kinds["exposed_comm"]["evidence"]["figures"]["exposed_pct_of_busy"] == pytest.approx(17.9, abs=0.2)
    assert any(BAD_TRACE in note for note in found["notes"])
