"""RLinf's `worker_groups` select in nrlprof exactly the groups RLinf's own `ProfileConfig.profiles_worker_group`
selects (RLinf 0.3.0's real config class): names without case, `all` for every group, nothing for none, and an
RLinf job's other actors never."""

from __future__ import annotations

import pytest

from nrlprof.config.plan import NSYS
from nrlprof.config.yaml_config import plan_from_mapping
from nrlprof.workers.frameworks import RLINF
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_backend

pytestmark = pytest.mark.framework
pytest.importorskip("rlinf.scheduler", reason="RLinf is installed by scripts/setup-venv")

GROUPS = ("ActorGroup", "RolloutGroup", "EnvGroup")
WORKER_GROUPS = (
    ["ActorGroup"],
    "ActorGroup",
    ["actorgroup"],
    ["ROLLOUTGROUP", "EnvGroup"],
    "all",
    ["All"],
    ["ActorGroup", "all"],
    ["Actor"],
    [],
    None,
)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("worker_groups", WORKER_GROUPS, ids=repr)
def test_worker_groups_select_what_rlinfs_own_config_selects(worker_groups, enabled):
    from rlinf.scheduler.hardware.accelerators.nvidia_gpu import NsightConfig

    rlinfs = NsightConfig(backend="nsight", enabled=enabled, worker_groups=worker_groups)
    section = {"backend": "nsight", "enabled": enabled, "worker_groups": worker_groups}
    nsys = plan_from_mapping({"cluster": {"profiling": section}}).backend(NSYS)
    for rank, group in enumerate(GROUPS):
        worker = WorkerIdentity("EmbodiedFSDPActor", f"{group}:{rank}", rank, framework=RLINF)
        selected = nsys is not None and match_backend(nsys, worker) is not None
        assert selected == rlinfs.profiles_worker_group(group), (group, worker_groups, enabled)
    others = (WorkerIdentity("WorkerManager", "WorkerManager", 0, framework=RLINF), WorkerIdentity("Helper", None, 0))
    assert nsys is None or all(match_backend(nsys, other) is None for other in others)


def test_the_match_line_names_the_group_all_selected():
    nsys = plan_from_mapping({"cluster": {"profiling": {"backend": "nsight", "worker_groups": "all"}}}).backend(NSYS)
    match = match_backend(nsys, WorkerIdentity("EmbodiedFSDPActor", "ActorGroup:0", 0, framework=RLINF))
    assert (match.target.pattern, match.matched_name) == ("all", "ActorGroup")


@pytest.mark.parametrize("steps", [None, [0], [0, 1], [3, 10, 50]], ids=repr)
def test_steps_are_the_steps_rlinfs_own_config_profiles(steps):
    """RLinf's step numbers from 0; null: the whole run, one capture with no capture range."""
    from rlinf.scheduler.hardware.accelerators.nvidia_gpu import NsightConfig

    rlinfs = NsightConfig(backend="nsight", worker_groups=["ActorGroup"], steps=steps)
    section = {"backend": "nsight", "worker_groups": ["ActorGroup"], "steps": steps}
    nsys = plan_from_mapping({"cluster": {"profiling": section}}).backend(NSYS)
    if steps is None:
        assert nsys.steps is None and "capture-range" not in nsys.options_dict
        assert all(rlinfs.should_profile_step(step) for step in range(60))
        return
    ours = {step for window in nsys.steps.windows for step in range(window.first, window.last + 1)}
    assert ours == {step for step in range(60) if rlinfs.should_profile_step(step)}


@pytest.mark.parametrize("worker_groups", [["actorgroup"], "all"], ids=repr)
def test_plans_size_estimate_selects_the_groups_the_windows_select(worker_groups):
    from nrlprof.tools.remote.rates import Rate, expected_sizes

    section = {"backend": "nsight", "worker_groups": worker_groups, "steps": [2, 3]}
    plan = plan_from_mapping({"cluster": {"profiling": section}})
    (row,) = expected_sizes(plan, [Rate("nsys", "ActorGroup", 1000.0, ("1",))])
    assert (row["worker"], row["bytes_per_rank"]) == ("ActorGroup", 2000)
