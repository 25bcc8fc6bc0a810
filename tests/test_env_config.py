"""The NRL_* variables -> Plan: NeMo RL's semantics, validated eagerly (also under python -O)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nrlprof.config.env import plan_from_env
from nrlprof.config.plan import Plan
from nrlprof.config.steps import Window
from nrlprof.errors import ConfigError

NSYS = {"NRL_NSYS_WORKER_PATTERNS": "*policy*"}


def nsys_plan(step_range: str, **extra: str) -> Plan:
    return plan_from_env({**NSYS, "NRL_NSYS_PROFILE_STEP_RANGE": step_range, **extra})


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("0:10", "start 0 is below 1"),
        ("5:5", "range 5:5 is empty"),
        ("10:5", "range 10:5 is empty"),
        ("abc:10", "is not an integer"),
        ("1:xyz", "is not an integer"),
        ("1:2:3", "more than one ':'"),
        ("-1:3", "start -1 is below 1"),
        ("3:", "is not an integer"),
        ("0", "step 0 is below 1"),
        (",", "no steps given"),
        ("99999999999", "above 2147483647"),
        ("1:" + "9" * 5000, "above 2147483648"),
        ("\u00b2", "is not an integer"),
    ],
)
def test_bad_step_ranges_name_variable_value_and_form(spec, fragment):
    with pytest.raises(ConfigError) as caught:
        nsys_plan(spec)
    message = str(caught.value)
    assert fragment in message
    assert "NRL_NSYS_PROFILE_STEP_RANGE" in message
    assert (repr(spec) if len(repr(spec)) <= 200 else repr(spec)[:200]) in message, "the value, cut when long"
    assert "start:stop" in message
    assert isinstance(caught.value, ValueError)


def test_torch_range_errors_name_the_torch_variable():
    with pytest.raises(ConfigError) as caught:
        plan_from_env({"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*", "NRL_TORCH_PROFILE_STEP_RANGE": "a:b"})
    assert str(caught.value).startswith("NRL_TORCH_PROFILE_STEP_RANGE='a:b' is invalid: 'a' is not an integer.")
    assert str(caught.value).count("NRL_TORCH_PROFILE_STEP_RANGE") == 1


@pytest.mark.parametrize(
    ("spec", "windows"),
    [
        (" 3 : 5 ", [(3, 4)]),
        ("5", [(5, 5)]),
        ("1,2,5", [(1, 2), (5, 5)]),
        ("3:5,10", [(3, 4), (10, 10)]),
        ("3:5,5:7", [(3, 6)]),
    ],
)
def test_accepted_step_specs_become_windows_of_consecutive_steps(spec, windows):
    steps = nsys_plan(spec).backend("nsys").steps
    assert steps.windows == tuple(Window(a, b) for a, b in windows)


def test_patterns_are_stripped_and_empty_items_ignored():
    plan = plan_from_env({"NRL_NSYS_WORKER_PATTERNS": " *policy* ,, *vllm* , ", "NRL_NSYS_PROFILE_STEP_RANGE": "2:3"})
    assert [t.pattern for t in plan.backend("nsys").targets] == ["*policy*", "*vllm*"]


def test_patterns_without_range_and_range_without_patterns_are_errors():
    with pytest.raises(ConfigError, match="NRL_NSYS_PROFILE_STEP_RANGE"):
        plan_from_env({"NRL_NSYS_WORKER_PATTERNS": "*policy*"})
    with pytest.raises(ConfigError, match="NRL_NSYS_WORKER_PATTERNS"):
        plan_from_env({"NRL_NSYS_PROFILE_STEP_RANGE": "1:3"})
    with pytest.raises(ConfigError, match="NRL_TORCH_PROFILE_WORKER_PATTERNS"):
        plan_from_env({"NRL_TORCH_PROFILE_STEP_RANGE": "1:3"})


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", '"t"', '{"t": [1]}'])
def test_extra_options_must_be_a_json_object_of_scalars(bad):
    with pytest.raises(ConfigError, match="NRL_NSYS_EXTRA_OPTIONS"):
        nsys_plan("2:3", NRL_NSYS_EXTRA_OPTIONS=bad)


def test_default_nsys_options_and_extra_options_merge_over_them():
    default = dict(nsys_plan("2:3").backend("nsys").options)
    assert default == {"t": "cuda,nvtx", "capture-range": "cudaProfilerApi", "capture-range-end": "stop"}
    merged = dict(
        nsys_plan(
            "2:3,5",
            NRL_NSYS_EXTRA_OPTIONS='{"t": "cuda,nvtx,osrt", "cuda-memory-usage": true, "capture-range-end": null}',
        )
        .backend("nsys")
        .options
    )
    # null capture-range-end: nrlprof's end (nsys's own default, stop-shutdown, would end the worker)
    assert merged == {
        "t": "cuda,nvtx,osrt",
        "capture-range": "cudaProfilerApi",
        "capture-range-end": "repeat:2",
        "cuda-memory-usage": "true",
    }


def test_two_windows_get_repeat_so_each_report_is_finalised_at_its_window():
    assert dict(nsys_plan("2:3,5").backend("nsys").options)["capture-range-end"] == "repeat:2"


def test_output_and_o_together_are_a_contradiction():
    with pytest.raises(ConfigError, match="only one of"):
        nsys_plan("2:3", NRL_NSYS_EXTRA_OPTIONS='{"o": "a", "output": "b"}')


@pytest.mark.parametrize(("text", "ranks"), [("0,1", {0, 1}), ("all", None), (" 3 ", {3}), ("ALL", None)])
def test_rank_selection(text, ranks):
    plan = nsys_plan("2:3", NRL_NSYS_RANKS=text)
    target = plan.backend("nsys").targets[0]
    assert target.ranks == (None if ranks is None else frozenset(ranks))


@pytest.mark.parametrize("text", ["x", "-1", "0,a", ",", "1.5"])
def test_bad_rank_lists(text):
    with pytest.raises(ConfigError, match="NRL_NSYS_RANKS"):
        nsys_plan("2:3", NRL_NSYS_RANKS=text)


def test_torch_settings_and_directory():
    plan = plan_from_env(
        {
            "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*",
            "NRL_TORCH_PROFILE_STEP_RANGE": "1:2",
            "NRL_TORCH_PROFILE_DIR": "/tmp/t",
            "NRL_TORCH_PROFILE_RECORD_SHAPES": "1",
            "NRL_TORCH_PROFILE_GZIP": "true",
        }
    )
    assert plan.torch.directory == "/tmp/t"
    assert plan.torch.record_shapes and plan.torch.gzip and not plan.torch.with_stack
    with pytest.raises(ConfigError, match="NRL_TORCH_PROFILE_WITH_STACK"):
        plan_from_env({"NRL_TORCH_PROFILE_WITH_STACK": "maybe"})


def test_log_level_and_timeout_are_validated():
    with pytest.raises(ConfigError, match="NRL_PROFILE_LOG_LEVEL"):
        plan_from_env({"NRL_PROFILE_LOG_LEVEL": "LOUD"})
    with pytest.raises(ConfigError, match="NRL_PROFILE_TIMEOUT_S"):
        plan_from_env({"NRL_PROFILE_TIMEOUT_S": "-3"})
    assert plan_from_env({"NRL_PROFILE_TIMEOUT_S": "2.5"}).timeout_s == 2.5


def test_rocprof_from_env():
    plan = plan_from_env(
        {"NRL_ROCPROF_WORKER_PATTERNS": "*policy*", "NRL_ROCPROF_ARGS": '{"T": "hip", "output-format": "json"}'}
    )
    backend = plan.backend("rocprof")
    assert backend.steps is None
    assert dict(backend.options) == {"T": "hip", "output-format": "json"}


def test_plan_round_trips_through_json_for_workers():
    plan = nsys_plan("2:3,7", NRL_NSYS_RANKS="0,2")
    assert Plan.from_json(plan.to_json()) == plan


def test_validation_survives_python_dash_o():
    code = (
        "import os; os.environ.update(NRL_NSYS_WORKER_PATTERNS='*', NRL_NSYS_PROFILE_STEP_RANGE='0:10')\n"
        "try:\n    import nrlprof\nexcept ValueError as err:\n    print('rejected:', type(err).__name__)\n"
    )
    result = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert "rejected: ConfigError" in result.stdout


def test_discrete_mode_from_env():
    plan = nsys_plan("2:4", NRL_NSYS_DISCRETE_METHODS="generate, train")
    target = plan.backend("nsys").targets[0]
    assert target.discrete and target.methods == ("generate", "train")
    assert dict(plan.backend("nsys").options)["capture-range-end"] == "repeat"
    assert nsys_plan("2:4", NRL_NSYS_DISCRETE="1").backend("nsys").targets[0].discrete
    with pytest.raises(ConfigError, match="NRL_NSYS_DISCRETE"):
        nsys_plan("2:4", NRL_NSYS_DISCRETE="sometimes")
