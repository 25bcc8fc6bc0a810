"""Mistakes a newcomer makes, caught before the job starts: misspelled variables, `3-5` for steps, an nsys
output name every worker of a node would share."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nrlprof import ConfigError
from nrlprof.config.env import load_plan
from nrlprof.config.misspelled import misspelled_variables
from nrlprof.config.yaml_config import plan_from_mapping


def clean_env(**variables: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "NRLPROF_"))}, **variables}


def driver(**variables: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "print('ran')"], env=clean_env(**variables), capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_a_misspelled_variable_is_named_with_the_one_meant():
    result = driver(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="3:5", NRL_NSYS_RANK="0")
    assert result.returncode == 0
    assert "NRL_NSYS_RANK is not a variable nrlprof reads; did you mean NRL_NSYS_RANKS?" in result.stderr


def test_misspelled_selecting_variables_are_named_although_nothing_is_configured():
    result = driver(NRL_TORCH_WORKER_PATTERNS="*policy*", NRL_TORCH_STEP_RANGE="3:5")
    assert "did you mean NRL_TORCH_PROFILE_STEP_RANGE?" in result.stderr
    assert "did you mean NRL_TORCH_PROFILE_WORKER_PATTERNS?" in result.stderr


def test_a_frameworks_own_nrl_variables_get_no_warning():
    """NeMo RL keeps settings of its own under NRL_ (NRL_LOG_LEVEL, NRL_FORCE_REBUILD_VENVS)."""
    names = {"NRL_LOG_LEVEL": "INFO", "NRL_FORCE_REBUILD_VENVS": "true", "NRL_IGNORE_VERSION_MISMATCH": "1"}
    assert set(misspelled_variables(names).values()) == {None}
    assert driver(**names).stderr == ""


def test_a_missing_partner_names_the_misspelled_variable_that_is_present():
    env = {"NRL_NSYS_PROFILE_STEP_RANGE": "3:5", "NRL_NSYS_WORKER_PATTERN": "*policy*"}
    with pytest.raises(ConfigError) as caught:
        load_plan(env)
    assert str(caught.value) == (
        "NRL_NSYS_WORKER_PATTERNS='' is invalid. Expected comma-separated worker patterns such as '*policy*' "
        "because NRL_NSYS_PROFILE_STEP_RANGE is set; NRL_NSYS_WORKER_PATTERN is set: did you mean "
        "NRL_NSYS_WORKER_PATTERNS?"
    )
    result = driver(**env)
    assert result.returncode == 2 and result.stdout == ""
    assert "did you mean NRL_NSYS_WORKER_PATTERNS?" in result.stderr


@pytest.mark.parametrize(("text", "meant"), [("3-5", "3:6"), ("1,4-4", "4:5"), ("10-12,20", "10:13")])
def test_a_dash_range_suggests_the_colon_range_it_means(text, meant):
    with pytest.raises(ConfigError, match=f"are '{meant}': the stop is exclusive"):
        load_plan({"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": text})


def test_a_backwards_dash_range_gets_no_suggestion():
    with pytest.raises(ConfigError) as caught:
        load_plan({"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "5-3"})
    assert "the stop is exclusive" not in str(caught.value)


@pytest.mark.parametrize("output", ["/data/prof/x", "x_%h"])
def test_an_nsys_output_name_without_the_pid_is_refused_in_every_route(output):
    with pytest.raises(ConfigError, match="every profiled worker on a node would write this same file"):
        load_plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5",
                   "NRL_NSYS_EXTRA_OPTIONS": f'{{"o": "{output}"}}'})  # fmt: skip
    verl = {"trainer": {"profile_steps": [3]}, "worker_nsight_options": {"output": output},
            "actor_rollout_ref": {"actor": {"profiler": {"enable": True, "all_ranks": True}}}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"worker_nsight_options\.output="):
        plan_from_mapping(verl)


@pytest.mark.parametrize("output", ["/data/prof/x_%p", "/data/prof/rank%q{RANK}"])
def test_an_nsys_output_name_of_each_process_is_taken(output):
    plan = load_plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5",
                      "NRL_NSYS_EXTRA_OPTIONS": f'{{"o": "{output}"}}'})  # fmt: skip
    assert plan.backend("nsys").options_dict["o"] == output
