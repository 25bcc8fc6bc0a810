"""The runtime_env fragment of a matched worker and how it merges under the user's keys."""

from __future__ import annotations

from nrlprof.config.env import plan_from_env
from nrlprof.config.plan import Plan
from nrlprof.launch.runtime_env import (
    PLAN_VARIABLE,
    RAY_SETUP_HOOK_VARIABLE,
    SETUP_HOOK,
    USER_SETUP_HOOK_VARIABLE,
    fragment_for,
    merge_runtime_env,
    parse_worker_descriptor,
)
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_worker

ENV = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5,10"}


def fragment(identity: WorkerIdentity, environ=ENV) -> dict:
    plan = plan_from_env(environ)
    return fragment_for(plan, identity, match_worker(plan, identity))


def test_nsys_fragment_has_output_name_without_colons_and_the_plan():
    result = fragment(WorkerIdentity("DTensorPolicyWorker", None, 1))
    nsight = result["_nsight"]
    assert nsight["o"] == "dtensor_policy_worker_3-4_10_%p"
    assert nsight["capture-range"] == "cudaProfilerApi" and nsight["capture-range-end"] == "repeat:2"
    assert ":" not in nsight["o"] and " " not in nsight["o"]
    env_vars = result["env_vars"]
    assert Plan.from_json(env_vars[PLAN_VARIABLE]) == plan_from_env(ENV)
    worker = parse_worker_descriptor(env_vars["NRLPROF_WORKER"])
    identity, targets = worker.identity, worker.targets
    assert identity.rank == 1 and list(targets) == ["nsys"] and targets["nsys"].pattern == "*policy*"
    assert env_vars[RAY_SETUP_HOOK_VARIABLE] == SETUP_HOOK


def test_unmatched_worker_gets_nothing():
    assert fragment(WorkerIdentity("RewardWorker", None, 0)) == {}


def test_user_keys_win_and_their_env_vars_and_interpreter_are_kept():
    user = {
        "env_vars": {"RANK": "1", "NRLPROF_WORKER": "mine"},
        "py_executable": "/venv/bin/python",
        "_nsight": {"t": "osrt"},
    }
    merged = merge_runtime_env(user, fragment(WorkerIdentity("DTensorPolicyWorker", None, 1)))
    assert merged["py_executable"] == "/venv/bin/python"
    assert merged["_nsight"] == {"t": "osrt"}
    assert merged["env_vars"]["RANK"] == "1" and merged["env_vars"]["NRLPROF_WORKER"] == "mine"
    assert PLAN_VARIABLE in merged["env_vars"]
    assert user["env_vars"] == {"RANK": "1", "NRLPROF_WORKER": "mine"}


def test_an_earlier_setup_hook_still_runs_after_ours():
    piece = fragment(WorkerIdentity("DTensorPolicyWorker", None, 0))
    merged = merge_runtime_env({"env_vars": {RAY_SETUP_HOOK_VARIABLE: "pkg.hook"}}, piece)
    assert merged["env_vars"][RAY_SETUP_HOOK_VARIABLE] == SETUP_HOOK
    assert merged["env_vars"][USER_SETUP_HOOK_VARIABLE] == "pkg.hook"
    inherited = merge_runtime_env(None, piece, inherited_setup_hook="job.hook")
    assert inherited["env_vars"][USER_SETUP_HOOK_VARIABLE] == "job.hook"


def test_py_modules_of_the_user_are_kept_and_nrlprofs_added():
    shipped = {"py_modules": ["gcs://_ray_pkg_nrlprof.zip"]}
    merged = merge_runtime_env({"py_modules": ["gcs://_ray_pkg_user.zip"], "pip": ["x"]}, shipped)
    assert merged["py_modules"] == ["gcs://_ray_pkg_user.zip", "gcs://_ray_pkg_nrlprof.zip"]
    assert merged["pip"] == ["x"]
    assert merge_runtime_env(None, shipped)["py_modules"] == ["gcs://_ray_pkg_nrlprof.zip"]
