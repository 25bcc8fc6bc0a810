"""The NRL_* variables -> Plan: NeMo RL's semantics, validated eagerly (also under python -O); the switch words,
the timeout's bounds, step lists and their windows (also from YAML lists), the memory variables, and a `3-5` range
answered with the range it means."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nrlprof.config.env import load_plan, plan_from_env
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
    program = Path(__file__).parent / "programs" / "step_zero_rejected.py"
    result = subprocess.run([sys.executable, "-O", str(program)], capture_output=True, text=True, check=True)
    assert "rejected: ConfigError" in result.stdout


def test_discrete_mode_from_env():
    plan = nsys_plan("2:4", NRL_NSYS_DISCRETE_METHODS="generate, train")
    target = plan.backend("nsys").targets[0]
    assert target.discrete and target.methods == ("generate", "train")
    assert dict(plan.backend("nsys").options)["capture-range-end"] == "repeat"
    assert nsys_plan("2:4", NRL_NSYS_DISCRETE="1").backend("nsys").targets[0].discrete
    with pytest.raises(ConfigError, match="NRL_NSYS_DISCRETE"):
        nsys_plan("2:4", NRL_NSYS_DISCRETE="sometimes")


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        *[(word, True) for word in ("1", "true", "yes", "on", "YES", " On ")],
        *[(word, False) for word in ("0", "false", "no", "off", "Off")],
    ],
)
def test_torch_switch_words(word, expected):
    from nrlprof.config.env import plan_from_env

    base = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*p*", "NRL_TORCH_PROFILE_STEP_RANGE": "2"}
    for variable, field in [
        ("NRL_TORCH_PROFILE_RECORD_SHAPES", "record_shapes"),
        ("NRL_TORCH_PROFILE_MEMORY", "profile_memory"),
        ("NRL_TORCH_PROFILE_WITH_STACK", "with_stack"),
        ("NRL_TORCH_PROFILE_WITH_FLOPS", "with_flops"),
        ("NRL_TORCH_PROFILE_GZIP", "gzip"),
    ]:
        torch = plan_from_env(base | {variable: word}).torch
        assert getattr(torch, field) is expected, (variable, word)


def test_torch_switch_rejects_other_words():
    from nrlprof.config.env import plan_from_env
    from nrlprof.errors import ConfigError

    base = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*p*", "NRL_TORCH_PROFILE_STEP_RANGE": "2"}
    with pytest.raises(ConfigError, match="NRL_TORCH_PROFILE_GZIP"):
        plan_from_env(base | {"NRL_TORCH_PROFILE_GZIP": "maybe"})


def test_patterns_whitespace_stripped_and_empty_items_ignored():
    from nrlprof.config.env import plan_from_env

    plan_ = plan_from_env({"NRL_NSYS_WORKER_PATTERNS": " *policy* ,, *vllm*, ", "NRL_NSYS_PROFILE_STEP_RANGE": "2"})
    (backend,) = plan_.backends
    assert [t.pattern for t in backend.targets] == ["*policy*", "*vllm*"]


@pytest.mark.parametrize(("text", "seconds"), [("5", 5.0), ("0.5", 0.5), (" 30 ", 30.0), ("1e6", 1e6)])
def test_timeout_accepted(text, seconds):
    from nrlprof.config.env import plan_from_env

    base = {"NRL_NSYS_WORKER_PATTERNS": "*p*", "NRL_NSYS_PROFILE_STEP_RANGE": "2"}
    assert plan_from_env(base | {"NRL_PROFILE_TIMEOUT_S": text}).timeout_s == seconds


def test_timeout_default_is_120():
    from nrlprof.config.env import plan_from_env

    assert plan_from_env({"NRL_NSYS_WORKER_PATTERNS": "*p*", "NRL_NSYS_PROFILE_STEP_RANGE": "2"}).timeout_s == 120


@pytest.mark.parametrize("text", ["0", "-1", "abc", "nan", "inf", "1e7"])
def test_timeout_rejected_naming_the_variable(text):
    from nrlprof.config.env import plan_from_env
    from nrlprof.errors import ConfigError

    base = {"NRL_NSYS_WORKER_PATTERNS": "*p*", "NRL_NSYS_PROFILE_STEP_RANGE": "2"}
    with pytest.raises(ConfigError, match="NRL_PROFILE_TIMEOUT_S") as raised:
        plan_from_env(base | {"NRL_PROFILE_TIMEOUT_S": text})
    assert text in str(raised.value)


@pytest.mark.parametrize(
    ("text", "windows"),
    [
        ("1,5:8", [(1, 1), (5, 7)]),
        ("1,2,5", [(1, 2), (5, 5)]),
        ("3:5,10", [(3, 4), (10, 10)]),
        ("5:8,1", [(1, 1), (5, 7)]),
        ("2:4,3:6", [(2, 5)]),
        ("2:4,4", [(2, 4)]),
        ("7", [(7, 7)]),
    ],
)
def test_step_lists_become_maximal_runs_of_consecutive_steps(text, windows):
    from nrlprof.config.steps import parse_step_spec

    selection = parse_step_spec(text, "NRL_NSYS_PROFILE_STEP_RANGE")
    assert [(w.first, w.last) for w in selection.windows] == windows


def test_window_labels_and_membership():
    from nrlprof.config.steps import parse_step_spec

    selection = parse_step_spec("3:5,10", "NRL_NSYS_PROFILE_STEP_RANGE")
    assert [w.label for w in selection.windows] == ["3-4", "10"]
    first, second = selection.windows
    assert [s in first for s in (2, 3, 4, 5)] == [False, True, True, False]
    assert list(first.steps) == [3, 4] and list(second.steps) == [10]


def test_only_integer_steps_are_in_a_window():
    from nrlprof.config.steps import Window

    window = Window(3, 4)
    assert 3 in window and 4 in window
    assert 3.0 not in window and "3" not in window and None not in window


def test_a_huge_step_number_is_refused_and_shown_cut():
    digits = "1" * 40
    with pytest.raises(ConfigError, match="NRL_NSYS_PROFILE_STEP_RANGE") as raised:
        plan_from_env(NSYS | {"NRL_NSYS_PROFILE_STEP_RANGE": digits})
    message = str(raised.value)
    assert "1" * 20 + "..." in message and f"{digits} is above" not in message


@pytest.mark.parametrize("variable", ["NRL_MEMORY_PROFILE_DIR", "NRL_MEMORY_PROFILE_MAX_ENTRIES"])
def test_memory_settings_without_memory_patterns_are_an_error(variable):
    with pytest.raises(ConfigError, match="NRL_MEMORY_PROFILE_WORKER_PATTERNS"):
        plan_from_env(NSYS | {"NRL_NSYS_PROFILE_STEP_RANGE": "3:5", variable: "5"})


def memory_backend(**extra: str):
    variables = {"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_MEMORY_PROFILE_STEP_RANGE": "2"} | extra
    (backend,) = plan_from_env(variables).backends
    return backend


def test_memory_directory_and_history_length_defaults_and_settings():
    default = memory_backend()
    assert default.kind == "memory"
    assert default.output_dir == "memory_profile"
    assert dict(default.options) == {"max_entries": "100000", "on_oom": "0"}
    chosen = memory_backend(
        NRL_MEMORY_PROFILE_DIR=" /data/mem ", NRL_MEMORY_PROFILE_MAX_ENTRIES="500", NRL_MEMORY_PROFILE_ON_OOM="1"
    )
    assert chosen.output_dir == "/data/mem"
    assert dict(chosen.options) == {"max_entries": "500", "on_oom": "1"}


@pytest.mark.parametrize("values", [[], (), {"a": 1}, 5, None, [True], [0], [1, "2"]])
def test_a_yaml_step_list_must_be_a_non_empty_list_of_steps(values):
    from nrlprof.config.steps import steps_from_list

    with pytest.raises(ConfigError, match=r"trainer\.profile_steps"):
        steps_from_list(values, "trainer.profile_steps")


def test_a_yaml_step_list_becomes_windows():
    from nrlprof.config.steps import steps_from_list

    selection = steps_from_list([5, 1, 2], "trainer.profile_steps")
    assert [(w.first, w.last) for w in selection.windows] == [(1, 2), (5, 5)]
    assert [(w.first, w.last) for w in steps_from_list("3:5", "k").windows] == [(3, 4)]


@pytest.mark.parametrize(("text", "meant"), [("3-5", "3:6"), ("1,4-4", "4:5"), ("10-12,20", "10:13")])
def test_a_dash_range_suggests_the_colon_range_it_means(text, meant):
    with pytest.raises(ConfigError, match=f"are '{meant}': the stop is exclusive"):
        load_plan({"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": text})


def test_a_backwards_dash_range_gets_no_suggestion():
    with pytest.raises(ConfigError) as caught:
        load_plan({"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "5-3"})
    assert "the stop is exclusive" not in str(caught.value)
