"""Checks that tell apart code the mutation run changed unseen: window membership, long step numbers, the memory
variables, repeat counts, removed nsys defaults, the steps label."""

from __future__ import annotations

import pytest

from nrlprof.config.env import plan_from_env
from nrlprof.errors import ConfigError

NSYS = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}


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
        plan_from_env(NSYS | {variable: "5"})


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


@pytest.mark.parametrize("end", ["repeat:0", "repeat-shutdown:0", "repeat:x", "repeat:"])
def test_a_repeat_count_below_one_is_an_error(end):
    with pytest.raises(ConfigError, match="capture-range-end"):
        plan_from_env(NSYS | {"NRL_NSYS_EXTRA_OPTIONS": f'{{"capture-range-end": "{end}"}}'})


def test_null_removes_an_nsys_default_and_other_options_are_merged():
    plan = plan_from_env(NSYS | {"NRL_NSYS_EXTRA_OPTIONS": '{"t": null, "sample": "none"}'})
    (backend,) = plan.backends
    options = dict(backend.options)
    assert "t" not in options and options["sample"] == "none"
    assert options["capture-range"] == "cudaProfilerApi" and options["capture-range-end"] == "stop"


def test_steps_label_of_a_selection_and_of_the_whole_lifetime():
    from nrlprof.config.nsys_options import steps_label
    from nrlprof.config.steps import parse_step_spec

    assert steps_label(parse_step_spec("3:5,10", "X")) == "3-4_10"
    assert steps_label(parse_step_spec("7", "X")) == "7"
    assert steps_label(None) == "all"
