"""`merge --workers/--ranks/--steps` and the size guard: a timeline past what Perfetto's UI opens is not written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.traces import gpu_trace, load, write_json

from nrlprof.cli import main
from nrlprof.errors import ToolError
from nrlprof.tools.merge import estimate as sizes
from nrlprof.tools.merge.select import Selection
from nrlprof.tools.merge.timeline import merge_traces


@pytest.fixture
def run(tmp_path) -> Path:
    """policy ranks 0-3 and a generation worker (rank 0), steps 3 and 4 each (2000 us apart)."""
    root = tmp_path / "run"
    for rank in range(4):
        write_json(root / f"policy.rank{rank}.steps3-4.{1000 + rank}.pt.trace.json", gpu_trace(rank, 1000 + rank))
    trace = gpu_trace(0, 2000, worker="generation")
    write_json(root / "generation.rank0.steps3-4.2000.pt.trace.json", trace)
    return root


def processes(path: Path) -> set[str]:
    return {e["args"]["name"] for e in load(path)["traceEvents"] if e.get("name") == "process_name"}


def step_names(path: Path) -> list[str]:
    return sorted({e["name"] for e in load(path)["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#")})


def test_workers_and_ranks_choose_the_traces(run, tmp_path):
    output = tmp_path / "t.json"
    result = merge_traces([run], output, selection=Selection(("pol*",), frozenset({1, 2})))
    assert [p.name for p in result.merged] == ["policy.rank1.steps3-4.1001.pt.trace.json",
                                               "policy.rank2.steps3-4.1002.pt.trace.json"]  # fmt: skip
    assert {name.split(" (")[0] for name in processes(output)} >= {"policy rank 1", "policy rank 2"}
    assert not any("generation" in name or "rank 0" in name for name in processes(output))


def test_steps_keep_only_the_events_of_those_steps(run, tmp_path):
    output = tmp_path / "t.json"
    everything = merge_traces([run], tmp_path / "all.json")
    result = merge_traces([run], output, selection=Selection(steps=((4, 4),)))
    assert step_names(output) == ["ProfilerStep#4"]
    events = [e for e in load(output)["traceEvents"] if e.get("ph") != "M"]
    step4 = [e for e in events if e.get("name") == "ProfilerStep#4"]
    assert all(any(s["ts"] <= e["ts"] <= s["ts"] + s["dur"] for s in step4) for e in events)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 5 * 4  # every trace's four kernels of step 4
    assert result.events_in < everything.events_in


def test_the_estimate_is_close_to_what_is_written(run, tmp_path):
    for name, selection in (("all.json.gz", Selection()), ("some.json", Selection(("policy",), None, ((3, 3),)))):
        result = merge_traces([run], tmp_path / name, selection=selection)
        assert 0.75 * result.text_bytes <= result.estimated_bytes <= 1.25 * result.text_bytes, (name, result)


def test_a_timeline_past_perfettos_limit_is_not_written_and_filters_that_fit_are_named(run, tmp_path, monkeypatch):
    limit = merge_traces([run], tmp_path / "probe.json").estimated_bytes * 55 // 100
    monkeypatch.setattr(sizes, "PERFETTO_UI_LIMIT_BYTES", limit)
    output = tmp_path / "t.json.gz"
    with pytest.raises(ToolError) as refused:
        merge_traces([run], output)
    message = str(refused.value)
    assert "past the" in message and "--force" in message
    assert "--ranks 0 (about" in message and "--steps 3 (about" in message and "--ranks 0-1" not in message
    assert "--workers generation (about" in message and "--workers policy" not in message
    assert not output.exists() and not list(tmp_path.glob(".t.json.gz*"))
    forced = merge_traces([run], output, force=True)
    assert output.exists() and forced.estimated_bytes > limit


def test_the_command_line_filters_and_guard(run, tmp_path, monkeypatch, capsys):
    output = tmp_path / "t.json"
    argv = ["merge", str(run), "-o", str(output), "--json", "--workers", "policy", "--ranks", "0,2-3", "--steps", "3"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert [Path(p).name.split(".")[1] for p in data["merged"]] == ["rank0", "rank2", "rank3"]
    assert step_names(output) == ["ProfilerStep#3"]
    monkeypatch.setattr(sizes, "PERFETTO_UI_LIMIT_BYTES", 100)
    assert main(["merge", str(run), "-o", str(tmp_path / "big.json")]) == 2
    assert "nrlprof merge: the merged timeline would hold about" in capsys.readouterr().err
    assert main(["merge", str(run), "-o", str(tmp_path / "big.json"), "--force"]) == 0


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--ranks", "0,x", "'x' is not a rank or a range"), ("--ranks", "3-1", "'3-1' is not a rank or a range"),
     ("--workers", ", ,", "names no pattern"), ("--steps", "0:3", "--steps='0:3' is invalid")],
)  # fmt: skip
def test_bad_filters_are_bad_input(run, tmp_path, capsys, option, value, message):
    assert main(["merge", str(run), "-o", str(tmp_path / "t.json"), option, value]) == 2
    assert message in capsys.readouterr().err
