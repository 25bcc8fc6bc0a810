"""The step-anatomy model from written records: phases, idle time, critical path, clock offsets, settings."""

from __future__ import annotations

import io

import pytest
from helpers.anatomy import DRIVER_NODE, JOB, MS, OTHER_CLOCK_AHEAD_MS, OTHER_NODE, T0, actor_id, call

from nrlprof.anatomy.files import ACTORS_FILE, GAPS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines
from nrlprof.anatomy.settings import anatomy_settings
from nrlprof.errors import ConfigError, ToolError
from nrlprof.tools.figures.anatomy import anatomy_summary
from nrlprof.tools.merge.anatomy_tracks import anatomy_trace_events
from nrlprof.tools.render.anatomy_text import render_anatomy_text


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "anatomy" / "run-20260101T000000Z-1"
    run.mkdir(parents=True)
    append_lines(run / META_FILE, [{"job_id": JOB, "driver_node_id": DRIVER_NODE}])
    append_lines(
        run / ACTORS_FILE,
        [
            {"actor_id": actor_id(1), "worker": "gen", "rank": 0, "class": "Gen"},
            {"actor_id": actor_id(2), "worker": "gen", "rank": 1, "class": "Gen"},
            {"actor_id": actor_id(3), "worker": "ref", "rank": 0, "class": "Ref"},
            {"actor_id": actor_id(4), "worker": "reward", "rank": 0, "class": "Reward"},
            {"actor_id": actor_id(5), "worker": "train", "rank": 0, "class": "Train"},
        ],
    )
    append_lines(
        run / STEPS_FILE,
        [{"step": 1, "t_ns": T0}, {"step": 2, "t_ns": T0 + 1000 * MS}, {"finish": True, "t_ns": T0 + 1500 * MS}],
    )
    tasks = [
        # step 1: gen ranks 0 and 1 (rank 1 on the other node, slower), then ref beside reward, then train
        call(1, "generate", 10, 300),
        call(2, "generate", 10, 400, OTHER_NODE),
        call(3, "logprobs", 410, 700),
        call(4, "score", 410, 500),
        call(4, "score", 420, 520),
        call(5, "train", 710, 990),
        # step 2: one call running past the finish of the step is clipped for idle time
        call(1, "generate", 1010, 1100),
        call(5, "train", 1110, 1600),
    ]
    append_lines(run / TASKS_FILE, tasks)
    return tmp_path / "anatomy"


def test_phases_idle_and_critical_path_with_a_clock_ahead_on_another_node(run_dir):
    model = anatomy_summary(run_dir)
    assert model["clock_offsets_ms"][OTHER_NODE] == pytest.approx(OTHER_CLOCK_AHEAD_MS)
    # 1 ms each way: the offset lies within 50 ms +- 1 ms.
    assert model["clock_offset_bounds_ms"] == pytest.approx({DRIVER_NODE: 0, OTHER_NODE: 1})
    step = model["steps"]["1"]
    assert step["wall_ms"] == pytest.approx(1000)
    phases = {(p["worker"], p["method"]): p for p in step["phases"]}
    generate = phases[("gen", "generate")]
    assert (generate["start_ms"], generate["dur_ms"], generate["calls"]) == pytest.approx((10, 390, 2))
    assert generate["ranks"] == [0, 1] and generate["slowest_rank"] == 1
    assert generate["spread_ms"] == pytest.approx(100)
    score = phases[("reward", "score")]
    assert (score["start_ms"], score["dur_ms"], score["calls"]) == pytest.approx((410, 110, 2))
    assert step["critical_path"] == [
        {"worker": "gen", "method": "generate"},
        {"worker": "ref", "method": "logprobs"},
        {"worker": "train", "method": "train"},
    ]
    assert step["idle_ms"] == pytest.approx({"gen": 610, "ref": 710, "reward": 890, "train": 720})
    step2 = model["steps"]["2"]
    assert step2["wall_ms"] == pytest.approx(500)
    assert step2["idle_ms"]["train"] == pytest.approx(110)
    assert step2["critical_path"] == [
        {"worker": "gen", "method": "generate"},
        {"worker": "train", "method": "train"},
    ]


def test_text_and_trace_events(run_dir):
    text = render_anatomy_text(anatomy_summary(run_dir))
    assert "step 1: 1000.0 ms" in text
    assert "critical path: gen.generate -> ref.logprobs -> train.train" in text
    assert "slowest rank 1 (+100.0 ms)" in text
    events = anatomy_trace_events(run_dir)
    generate = sorted((e for e in events if e["name"] == "gen.generate [step 1]"), key=lambda e: e["tid"])
    # The other node's span moved onto the driver's clock.
    assert [e["ts"] for e in generate] == pytest.approx([(T0 + 10 * MS) / 1000] * 2)
    assert [e["dur"] for e in generate] == pytest.approx([290_000, 390_000])
    assert any(e["name"] == "step 2" and e["dur"] == pytest.approx(500_000) for e in events)


def test_the_drivers_own_window_work_is_its_steps_and_said_apart_from_the_phases(run_dir):
    """The gate's window actions (logged by `mark_line`) belong to the step they began in."""
    from nrlprof.anatomy.recorder import mark_line

    run = next(run_dir.iterdir())
    own = [(1, T0 + 2 * MS, T0 + 7 * MS, "prepare torch 2-2"), (2, T0 + 1001 * MS, T0 + 1005 * MS, "start torch 2-2"),
           (None, T0 + 1450 * MS, T0 + 1452 * MS, "stop torch")]  # fmt: skip
    append_lines(run / STEPS_FILE, [mark_line(m) for m in own])
    model = anatomy_summary(run_dir)
    assert model["steps"]["1"]["profiler"] == pytest.approx({"start_ms": 2, "ms": 5, "actions": "prepare torch 2-2"})
    step2 = model["steps"]["2"]["profiler"]
    assert step2 == {"start_ms": pytest.approx(1), "ms": pytest.approx(6), "actions": "start torch 2-2, stop torch"}
    assert model["steps"]["2"]["wall_ms"] == pytest.approx(500)  # the marks of the work are no steps
    text = render_anatomy_text(model)
    assert "         2.0 +       5.0 ms  nrlprof in the driver: prepare torch 2-2\n" in text
    [stop] = [e for e in anatomy_trace_events(run_dir) if e["name"] == "nrlprof: stop torch"]
    assert (stop["ts"], stop["dur"]) == pytest.approx(((T0 + 1450 * MS) / 1000, 2000))


def test_steps_in_a_time_the_gcs_may_have_let_calls_go_are_named_in_every_view(run_dir):
    """A read that found Ray's GCS full of calls it never saw (gaps.jsonl): the steps it spans may lack calls."""
    from rich.console import Console

    from nrlprof.tools.figures.summarize import summarize
    from nrlprof.tools.render.console import render_summary

    assert anatomy_summary(run_dir)["incomplete_steps"] == []
    run = next(run_dir.iterdir())
    append_lines(run / GAPS_FILE, [{"since_ns": T0 + 1200 * MS, "at_ns": T0 + 1300 * MS, "held": 8}])
    assert anatomy_summary(run_dir)["incomplete_steps"] == [2]
    append_lines(run / GAPS_FILE, [{"since_ns": 0, "at_ns": T0 + 10 * MS, "held": 8}])  # since the job's start
    model = anatomy_summary(run_dir)
    assert model["incomplete_steps"] == [1, 2]
    note = "step anatomy: steps 1-2 may lack calls: Ray's GCS was full"
    summary = summarize(run_dir)
    assert any(n.startswith(note) for n in summary.to_json()["notes"])
    console = Console(file=io.StringIO(), width=400)
    render_summary(summary, console)
    assert console.file.getvalue().count(note) == 1  # among the notes, said once


def test_no_run_is_a_clear_error(tmp_path):
    with pytest.raises(ToolError, match="no step-anatomy run"):
        anatomy_summary(tmp_path)


@pytest.mark.parametrize(
    ("environ", "backends", "enabled"),
    [
        ({}, False, False),
        ({}, True, True),
        ({"NRL_STEP_ANATOMY": "0"}, True, False),
        ({"NRL_STEP_ANATOMY": "1"}, False, True),
    ],
)
def test_on_with_a_backend_or_when_asked(environ, backends, enabled):
    assert anatomy_settings(environ, backends).enabled is enabled


def test_a_blank_directory_is_refused():
    with pytest.raises(ConfigError, match="NRL_STEP_ANATOMY_DIR=' ' is invalid"):
        anatomy_settings({"NRL_STEP_ANATOMY": "1", "NRL_STEP_ANATOMY_DIR": " "}, False)


def test_anatomy_lines_are_whole_json_lines_even_for_what_orjson_refuses(tmp_path):
    """The reader writes its lines with orjson; an integer past 64 bits (which orjson refuses) still gets written."""
    import json

    path = tmp_path / TASKS_FILE
    plain = [{"task_id": "ab", "start_ns": 1_700_000_000_000_000_000, "class": "Pölicy"}, {"failed": False}]
    append_lines(path, plain)
    append_lines(path, [{"huge": 1 << 70}])
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == [*plain, {"huge": 1 << 70}]


def test_calls_ray_counted_as_lost_are_said_with_their_number_and_steps(run_dir):
    from nrlprof.tools.figures.anatomy import incomplete_note

    run = next(run_dir.iterdir())
    assert anatomy_summary(run_dir)["lost_calls"] is None  # no count: an older run, or a GCS that gave none
    append_lines(run / GAPS_FILE, [{"since_ns": T0 + 1200 * MS, "at_ns": T0 + 1300 * MS, "held": 8, "lost": 5}])
    append_lines(run / GAPS_FILE, [{"since_ns": T0 + 1300 * MS, "at_ns": T0 + 1400 * MS, "held": 8, "lost": 2}])
    model = anatomy_summary(run_dir)
    assert (model["lost_calls"], model["incomplete_steps"]) == (7, [2])
    assert incomplete_note(model) == (
        "step anatomy: Ray's GCS let 7 call(s) go before they were read; step 2 lacks them "
        "(raise RAY_task_events_max_num_task_in_gcs before `ray start` / `ray.init`)"
    )
    early = {"incomplete_steps": [], "lost_calls": 3}  # let go before the first step
    assert "let 3 call(s) go before they were read; outside the recorded steps" in incomplete_note(early)
    assert incomplete_note({"incomplete_steps": [], "lost_calls": 0}) is None
