"""verl/RLinf configs, discrete mode and rocprof-sys on a real local Ray cluster with stand-in tools."""

from __future__ import annotations

import sys

import yaml
from helpers.trace_reading import load_trace, marker_steps, traces_under
from helpers.verl_example import VERL_EN_SHARED


def ranked(actor_class, ranks, **options):
    return [actor_class.options(runtime_env={"env_vars": {"RANK": str(r)}}, **options).remote() for r in ranks]


def test_verl_seed_config_launches_exactly_the_named_ranks_and_roles(ray_cluster, fresh_nrlprof, calls, monkeypatch):
    from workload import ActorRolloutRefWorker, CriticWorker

    for name in [n for n in __import__("os").environ if n.startswith("NRL_")]:
        monkeypatch.delenv(name)
    fresh_nrlprof.configure(yaml.safe_load(VERL_EN_SHARED))
    hybrid = ranked(ActorRolloutRefWorker, range(3))
    critics = ranked(CriticWorker, range(2))
    pids = ray_cluster.get([w.pid.remote() for w in hybrid + critics], timeout=180)
    by_pid = {r["pid"]: r for r in calls()}
    # rollout selects all ranks, so all three hybrid ranks are profiled; the critic only rank 0
    assert [pid in by_pid for pid in pids] == [True, True, True, True, False]
    options = by_pid[pids[0]]["options"]
    assert "--capture-range=cudaProfilerApi" in options and "--capture-range-end=repeat:2" in options
    assert options[options.index("-o") + 1].endswith("actor_rollout_ref_worker_1-2_5_%p")


RLINF_CONFIG = """
cluster:
  profiling:
    backend: nsight
    enabled: true
    worker_groups: [ActorGroup]
    steps: [3]
    options:
      t: cuda,nvtx,osrt
      sample: process-tree
      capture-range: cudaProfilerApi
      capture-range-end: stop
    flags: [python-backtrace]
"""


def test_rlinf_config_renders_options_and_flags_for_named_groups(ray_cluster, fresh_nrlprof, calls):
    from workload import CriticWorker

    fresh_nrlprof.configure(yaml.safe_load(RLINF_CONFIG))
    group = [CriticWorker.options(name=f"ActorGroup:{rank}").remote() for rank in range(2)]
    other = CriticWorker.options(name="RolloutGroup:0").remote()
    pids = ray_cluster.get([w.pid.remote() for w in [*group, other]], timeout=180)
    by_pid = {r["pid"]: r for r in calls()}
    assert [pid in by_pid for pid in pids] == [True, True, False]
    options = by_pid[pids[0]]["options"]
    assert options[options.index("-t") + 1] == "cuda,nvtx,osrt"
    assert "--sample=process-tree" in options and "--python-backtrace" in options
    assert "--capture-range-end=stop" in options
    for actor in [*group, other]:  # named actors outlive the test otherwise
        ray_cluster.kill(actor)


def test_disabled_rlinf_config_wraps_nothing(ray_cluster, fresh_nrlprof, calls, tmp_path):
    from workload import CriticWorker

    config = yaml.safe_load(RLINF_CONFIG)
    config["cluster"]["profiling"].update(enabled=False, output_dir=str(tmp_path / "never"))
    fresh_nrlprof.configure(config)
    worker = CriticWorker.options(name="ActorGroup:7").remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=180)
    assert pid not in {r["pid"] for r in calls()}
    assert not (tmp_path / "never").exists()
    ray_cluster.kill(worker)


def test_discrete_mode_one_trace_per_annotated_call_and_listed_method(ray_cluster, activate, tmp_path):
    from workload import ActorRolloutRefWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*actor_rollout*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:4",
        NRL_TORCH_PROFILE_DISCRETE_METHODS="generate_sequences",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
    )
    worker = ActorRolloutRefWorker.remote()
    for step in range(1, 6):
        nrlprof.step(step)
        ray_cluster.get([worker.update_actor.remote(step), worker.generate_sequences.remote(step)], timeout=300)
    files = traces_under(torch_dir / "actor_rollout_ref_worker")
    labels = sorted(".".join(p.name.split(".")[2:-4]) for p in files)
    assert labels == [
        "step2.actor_compute_adv",
        "step2.actor_rollout_ref_worker.generate_sequences",
        "step3.actor_compute_adv",
        "step3.actor_rollout_ref_worker.generate_sequences",
    ]
    for path in traces_under(torch_dir / "actor_rollout_ref_worker"):
        step = int(path.name.split(".")[2].removeprefix("step"))
        trace = load_trace(path)
        assert marker_steps(trace, "ProfilerStep#") == {step}
        assert marker_steps(trace, "update.") == set()  # only the annotated span, not the whole method


def test_rocprof_sys_wraps_with_the_driver_interpreter_and_derived_output(ray_cluster, activate, calls, tmp_path):
    from workload import DTensorPolicyWorker

    activate(
        NRL_ROCPROF_WORKER_PATTERNS="*policy*",
        NRL_ROCPROF_ARGS='{"T": "hip,hsa", "output-format": "json"}',
        NRL_ROCPROF_ENV='{"ROCPROFSYS_SAMPLING_FREQ": "100", "ROCPROFSYS_OUTPUT_PREFIX": "mine_"}',
        NRL_ROCPROF_OUTPUT_DIR=str(tmp_path / "rocprof"),
    )
    worker = DTensorPolicyWorker.remote()
    assert ray_cluster.get(worker.executable.remote(), timeout=180) == sys.executable
    pid = ray_cluster.get(worker.pid.remote())
    record = next(r for r in calls("rocprof-sys-python") if r["pid"] == pid)
    assert record["options"] == ["-T", "hip,hsa", "--output-format=json"]
    assert record["env"]["PYTHON_EXECUTABLE"] == sys.executable
    assert record["env"]["ROCPROFSYS_OUTPUT_PATH"] == str(tmp_path / "rocprof" / "dtensor_policy_worker" / "0")
    assert record["env"]["ROCPROFSYS_OUTPUT_PREFIX"] == "mine_"
    assert record["env"]["ROCPROFSYS_SAMPLING_FREQ"] == "100"
