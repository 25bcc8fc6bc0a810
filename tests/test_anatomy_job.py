"""Step anatomy on real Ray: phases of known lengths, concurrency, a slow rank, nested and threaded actors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import ray
from helpers.trace_reading import load_trace, traces_under

from nrlprof.anatomy.files import ACTORS_FILE, READER_FILE, STEPS_FILE, TASKS_FILE, read_lines
from nrlprof.tools.figures.anatomy import anatomy_summary
from nrlprof.tools.merge.anatomy_tracks import anatomy_trace_events
from nrlprof.tools.render.anatomy_text import render_anatomy_text

GENERATE_S = 0.3
SLOW_EXTRA_S = 0.4
SLOW_STEP, SLOW_RANK = 2, 1
LOGPROBS_S = 0.25
SCORE_S = 0.1
SCORES = 4
TRAIN_S = 0.25
SHARD_S = 0.15
STEPS = 3
SLACK_MS = 5.0  # timestamps of the driver and of the workers come from different calls to the same clock
PROFILED_STEPS = (2, 3)
# Torch's durations are in microseconds: up to 1 us off Ray's nanoseconds.
CLOCK_US_NS = 1000


@ray.remote(num_cpus=0)
class EngineShard:
    def run(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


@ray.remote(num_cpus=0)
class Generator:
    def __init__(self) -> None:
        self.shards = [EngineShard.remote() for _ in range(2)]

    def generate(self, seconds: float) -> int:
        ray.get([shard.run.remote(SHARD_S) for shard in self.shards])
        time.sleep(max(0.0, seconds - SHARD_S))
        return 1


@ray.remote(num_cpus=0)
class RefPolicy:
    def logprobs(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


@ray.remote(num_cpus=0, max_concurrency=SCORES)
class Reward:
    def score(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


@ray.remote(num_cpus=0)
class Trainer:
    def train(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


def run_job(nrlprof) -> None:
    generators = [Generator.remote() for _ in range(2)]
    ref, reward = RefPolicy.remote(), Reward.remote()
    trainers = [Trainer.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in range(2)]
    ray.get([a.__ray_ready__.remote() for a in [*generators, ref, reward, *trainers]])
    for step in range(1, STEPS + 1):
        nrlprof.step(step)
        lengths = [GENERATE_S + (SLOW_EXTRA_S if step == SLOW_STEP and r == SLOW_RANK else 0) for r in range(2)]
        ray.get([g.generate.remote(s) for g, s in zip(generators, lengths, strict=True)])
        ray.get([ref.logprobs.remote(LOGPROBS_S)] + [reward.score.remote(SCORE_S) for _ in range(SCORES)])
        ray.get([t.train.remote(TRAIN_S) for t in trainers])
    nrlprof.finish()


def phase(step: dict, worker: str, method: str) -> dict:
    found = [p for p in step["phases"] if p["worker"] == worker and p["method"] == method]
    assert len(found) == 1, f"{worker}.{method} in {step['phases']}"
    return found[0]


def check_anatomy(model: dict) -> None:
    assert sorted(model["steps"]) == [str(s) for s in range(1, STEPS + 1)]
    for label, step in model["steps"].items():
        names = {(p["worker"], p["method"]) for p in step["phases"]}
        assert names == {
            ("generator", "generate"),
            ("generator.engine_shard", "run"),
            ("ref_policy", "logprobs"),
            ("reward", "score"),
            ("trainer", "train"),
        }, label
        generate = phase(step, "generator", "generate")
        shards = phase(step, "generator.engine_shard", "run")
        logprobs = phase(step, "ref_policy", "logprobs")
        score = phase(step, "reward", "score")
        train = phase(step, "trainer", "train")
        slow = int(label) == SLOW_STEP
        assert generate["calls"] == 2 and generate["ranks"] == [0, 1]
        assert generate["dur_ms"] >= 1000 * (GENERATE_S + (SLOW_EXTRA_S if slow else 0)) - SLACK_MS
        # Two engines, each with two shards ranked within its engine.
        assert shards["calls"] == 4 and shards["ranks"] == [0, 1]
        assert shards["dur_ms"] >= 1000 * SHARD_S - SLACK_MS
        assert shards["start_ms"] >= generate["start_ms"]
        assert logprobs["calls"] == 1 and logprobs["dur_ms"] >= 1000 * LOGPROBS_S - SLACK_MS
        assert score["calls"] == SCORES and score["ranks"] == [0]
        assert score["dur_ms"] >= 1000 * SCORE_S - SLACK_MS
        assert train["calls"] == 2 and train["ranks"] == [0, 1]
        assert train["dur_ms"] >= 1000 * TRAIN_S - SLACK_MS
        # Sequence: generate, then logprobs beside score, then train.
        assert logprobs["start_ms"] >= generate["start_ms"] + generate["dur_ms"] - SLACK_MS
        assert score["start_ms"] >= generate["start_ms"] + generate["dur_ms"] - SLACK_MS
        assert train["start_ms"] >= logprobs["start_ms"] + logprobs["dur_ms"] - SLACK_MS
        assert step["wall_ms"] >= train["start_ms"] + train["dur_ms"] - SLACK_MS
        if slow:
            assert generate["slowest_rank"] == SLOW_RANK
            assert generate["spread_ms"] >= 1000 * SLOW_EXTRA_S - 50
        # logprobs outlasts score, so the path goes through it and not through score.
        assert step["critical_path"] == [
            {"worker": "generator", "method": "generate"},
            {"worker": "ref_policy", "method": "logprobs"},
            {"worker": "trainer", "method": "train"},
        ]
        idle = step["idle_ms"]
        assert set(idle) >= {"generator", "generator.engine_shard", "ref_policy", "reward", "trainer"}
        assert idle["trainer"] >= step["wall_ms"] - train["dur_ms"] - SLACK_MS
        assert idle["trainer"] <= step["wall_ms"] - 1000 * TRAIN_S + SLACK_MS
        assert idle["ref_policy"] <= step["wall_ms"] - 1000 * LOGPROBS_S + SLACK_MS
        assert 0 <= idle["generator"] <= step["wall_ms"]


def test_phases_slow_rank_nested_and_threaded_actors_and_critical_path(ray_cluster, activate, tmp_path, monkeypatch):
    from nrlprof.anatomy.pump import TaskEventPump

    final_reads, waits = TaskEventPump.final_reads, []
    monkeypatch.setattr(TaskEventPump, "final_reads", lambda pump: waits.append(1) or final_reads(pump))
    nrlprof = activate(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(tmp_path / "anatomy"))
    run_job(nrlprof)
    assert len(waits) == 1, "the job's end waits for Ray's last task events once"
    model = anatomy_summary(tmp_path / "anatomy")
    check_anatomy(model)
    # A job far from filling a quarter of the GCS: its reader process waited, Ray unimported, and the driver read
    # the calls at its end.
    [reader] = read_lines(Path(model["run"]) / READER_FILE)
    assert reader["reads"] == 0, reader
    text = render_anatomy_text(model)
    assert f"step {SLOW_STEP}:" in text
    assert "critical path: generator.generate -> ref_policy.logprobs -> trainer.train" in text
    assert f"slowest rank {SLOW_RANK}" in text
    events = anatomy_trace_events(tmp_path / "anatomy")
    spans = [e for e in events if e["ph"] == "X" and e["name"].startswith("trainer.train [step ")]
    assert len(spans) == 2 * STEPS
    assert {e["tid"] for e in spans} == {0, 1}
    json.dumps(events)


def test_a_driver_whose_reader_process_cannot_start_reads_and_counts_itself(ray_cluster, activate, tmp_path,
                                                                           monkeypatch, nrlprof_log):  # fmt: skip
    from nrlprof.anatomy import recorder

    def no_process(*_args):
        raise OSError("no reader process here")

    counted, closed = [], []
    job_task_count = recorder.job_task_count

    class AnswersKept:
        def __init__(self, gcs_address: str, job_id: bytes) -> None:
            self.count = job_task_count(gcs_address, job_id)

        def __call__(self) -> int:
            counted.append(self.count())
            return counted[-1]

        def close(self) -> None:
            self.count.close()
            closed.append(True)

    monkeypatch.setattr(recorder, "start_reader_process", no_process)
    monkeypatch.setattr(recorder, "job_task_count", AnswersKept)
    nrlprof = activate(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(tmp_path / "anatomy"))
    run_job(nrlprof)
    log = "\n".join(nrlprof_log)
    assert "reading in the driver" in log, log
    check_anatomy(anatomy_summary(tmp_path / "anatomy"))
    answers = counted
    assert closed == [True], "the driver's channel to the GCS is closed at the job's end"
    recorded = len(read_lines(Path(anatomy_summary(tmp_path / "anatomy")["run"]) / TASKS_FILE))
    assert answers and answers[-1] >= recorded, (answers, recorded)  # the GCS's count, asked from the driver
    assert "go before they were read" not in log and "may lack calls" not in log


def trainer_calls(directory: Path) -> dict[tuple[int, int], dict]:
    """(step, rank) -> the recorded task-event record of that trainer.train call (worker clock, ns)."""
    model = anatomy_summary(directory)
    run = Path(model["run"])
    names = {a["actor_id"]: int(a["rank"]) for a in read_lines(run / ACTORS_FILE) if a["worker"] == "trainer"}
    marks = sorted((m["t_ns"], m["step"]) for m in read_lines(run / STEPS_FILE) if "step" in m)
    calls = {}
    for task in read_lines(run / TASKS_FILE):
        if task["kind"] == "call" and task["method"] == "train" and task["actor_id"] in names:
            step = max(s for t, s in marks if t <= task["start_ns"])
            calls[(step, names[task["actor_id"]])] = task
    return calls


def test_anatomy_with_the_torch_profiler_on_the_trainers(ray_cluster, activate, tmp_path):
    torch_dir = tmp_path / "torch"
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="trainer",
        NRL_TORCH_PROFILE_STEP_RANGE=f"2:{PROFILED_STEPS[-1] + 1}",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
        NRL_STEP_ANATOMY_DIR=str(tmp_path / "anatomy"),
    )
    run_job(nrlprof)
    model = anatomy_summary(tmp_path / "anatomy")
    check_anatomy(model)
    traces = traces_under(torch_dir / "trainer")
    assert traces, "the torch profiler wrote no trainer trace"
    calls = trainer_calls(tmp_path / "anatomy")
    compared = []
    for trace_path in traces:
        trace = load_trace(trace_path)
        rank = trace["distributedInfo"]["rank"]
        for step in PROFILED_STEPS:
            ranges = [e for e in trace["traceEvents"] if e.get("name") == f"trainer.train [step {step}]"]
            assert len(ranges) == 1, (Path(trace_path).name, step)
            call = calls[(step, rank)]
            # Torch's range (us) and Ray's task:execute (ns, the worker's clock) of the same call.
            range_ns = 1000 * ranges[0]["dur"]
            body = (call["start_ns"], call["end_ns"])
            whole = (call["task_start_ns"], call["task_end_ns"])
            figures = f"rank {rank} step {step}: range {range_ns:.0f} ns, execute {body}, task {whole}"
            # The range is the method body: inside Ray's task:execute, itself inside the whole task:: span.
            assert whole[0] <= body[0] and body[1] <= whole[1], figures
            assert range_ns <= body[1] - body[0] + CLOCK_US_NS, figures
            # And the whole body: the method sleeps TRAIN_S. How much shorter than task:execute it is depends on
            # scheduling (CI under load: 8 ms and 20 ms of a 250 ms call), so that gap is not bounded here.
            assert range_ns + CLOCK_US_NS >= TRAIN_S * 1e9, figures
            compared.append(figures)
    assert len(compared) == 2 * len(PROFILED_STEPS)
    print("\n".join(compared))


def test_anatomy_off_with_a_backend_when_asked(ray_cluster, activate, tmp_path):
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="nothing_matches",
        NRL_TORCH_PROFILE_STEP_RANGE="2:3",
        NRL_TORCH_PROFILE_DIR=str(tmp_path / "torch"),
        NRL_STEP_ANATOMY="0",
        NRL_STEP_ANATOMY_DIR=str(tmp_path / "anatomy"),
    )
    nrlprof.step(1)
    nrlprof.finish()
    assert not (tmp_path / "anatomy").exists()


@pytest.mark.parametrize("value", ["2", "maybe"])
def test_a_bad_switch_names_the_variable(activate, value, tmp_path):
    with pytest.raises(ValueError, match=rf"NRL_STEP_ANATOMY='{value}' is invalid.*1 or 0"):
        activate(NRL_STEP_ANATOMY=value, NRL_STEP_ANATOMY_DIR=str(tmp_path))
