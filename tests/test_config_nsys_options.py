"""One nsys options builder: the NRL_* route and the YAML route accept, default and reject alike; RLinf's alias,
repeat counts, null removing a default, the steps label, and an output name without the pid refused."""

from __future__ import annotations

import json

import pytest

from nrlprof.config.env import load_plan, plan_from_env
from nrlprof.config.yaml_config import plan_from_mapping
from nrlprof.errors import ConfigError

ENV_SOURCE = "NRL_NSYS_EXTRA_OPTIONS"
YAML_SOURCE = "worker_nsight_options"
NSYS = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}


def env_options(steps: str, options: dict, *, discrete: bool = False) -> dict[str, str]:
    environ = {"NRL_NSYS_WORKER_PATTERNS": "*actor*", "NRL_NSYS_PROFILE_STEP_RANGE": steps}
    if options:
        environ[ENV_SOURCE] = json.dumps(options)
    if discrete:
        environ["NRL_NSYS_DISCRETE"] = "1"
    return plan_from_env(environ).backend("nsys").options_dict


def yaml_options(steps: str, options: dict, *, discrete: bool = False) -> dict[str, str]:
    config = {
        "trainer": {"profile_steps": steps},
        "actor_rollout_ref": {"actor": {"profiler": {"ranks": [0], "discrete": discrete}}},
        YAML_SOURCE: options,
    }
    return plan_from_mapping(config).backend("nsys").options_dict


ROUTES = [(env_options, ENV_SOURCE), (yaml_options, YAML_SOURCE)]
ROUTE_IDS = ["env", "yaml"]


def rejection(route, steps: str, options: dict) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        route(steps, options)
    return caught.value


def test_stop_with_two_windows_is_rejected_by_both_routes_alike():
    from_env = rejection(env_options, "1,5", {"capture-range-end": "stop"})
    from_yaml = rejection(yaml_options, "1,5", {"capture-range-end": "stop"})
    assert from_env.source == "NRL_NSYS_EXTRA_OPTIONS.capture-range-end"
    assert from_yaml.source == "worker_nsight_options.capture-range-end"
    assert from_env.value == from_yaml.value == "stop"
    assert from_env.expected == from_yaml.expected == "null, 'repeat' or 'repeat:N' with N >= 2"
    for error in (from_env, from_yaml):
        assert "the steps form 2 windows and 'stop' ends capturing after 1" in str(error)


# (capture-range-end, windows of "1,5,9": three) -> accepted?
CAPTURE_ENDS = [
    ("none", True),
    ("repeat", True),
    ("repeat:3", True),
    ("repeat:10", True),
    ("repeat-shutdown:3", True),
    ("stop", False),
    ("stop-shutdown", False),
    ("repeat:2", False),
    ("repeat-shutdown:2", False),
    ("repeat:0", False),
    ("repeat-shutdown", False),
    ("repeat:", False),
    ("repeat:x", False),
    ("repeat:1000000000000", False),
    ("Stop", False),
    ("sometimes", False),
]


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize(("end", "accepted"), CAPTURE_ENDS)
def test_capture_range_end_against_three_windows(route, source, end, accepted):
    if accepted:
        assert route("1,5,9", {"capture-range-end": end})["capture-range-end"] == end
    else:
        error = rejection(route, "1,5,9", {"capture-range-end": end})
        assert error.source == f"{source}.capture-range-end"
        assert error.value == end


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("end", ["stop", "stop-shutdown", "repeat:1", "repeat-shutdown:1", "none", "repeat"])
def test_every_end_that_keeps_one_capture_suits_one_window(route, source, end):
    assert route("2:4", {"capture-range-end": end})["capture-range-end"] == end


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize(("steps", "end"), [("3", "stop"), ("3:6", "stop"), ("1,5", "repeat:2"), ("1,3,5", "repeat:3")])
def test_default_end_is_stop_for_one_window_and_repeat_k_for_k(route, source, steps, end):
    assert route(steps, {}) == {"t": "cuda,nvtx", "capture-range": "cudaProfilerApi", "capture-range-end": end}
    assert route(steps, {"capture-range-end": None})["capture-range-end"] == end


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
def test_discrete_targets_repeat_without_a_count(route, source):
    assert route("1,5", {}, discrete=True)["capture-range-end"] == "repeat"
    assert route("2", {}, discrete=True)["capture-range-end"] == "repeat"


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
def test_aliases(route, source):
    options = route("2", {"output": "out_%p", "trace": "cuda", "--stats": True})
    assert options == {"t": "cuda", "capture-range": "cudaProfilerApi", "capture-range-end": "stop"} | {
        "o": "out_%p",
        "stats": "true",
    }


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize(("given", "end"), [(True, "stop"), ("true", "stop"), (False, "none"), ("false", "none")])
def test_stop_on_range_end_alias(route, source, given, end):
    assert route("2:4", {"stop-on-range-end": given})["capture-range-end"] == end


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
def test_stop_on_range_end_true_with_two_windows_is_rejected(route, source):
    error = rejection(route, "1,5", {"stop-on-range-end": True})
    assert error.source == f"{source}.capture-range-end"
    assert error.value == "stop"


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"o": "a", "output": "b"}, "output"),
        ({"t": "cuda", "trace": "nvtx"}, "trace"),
        ({"capture-range-end": "stop", "stop-on-range-end": True}, "stop-on-range-end"),
    ],
)
def test_two_names_for_one_option_conflict(route, source, options, key):
    error = rejection(route, "2", options)
    assert error.source == f"{source}.{key}"
    assert "only one of" in str(error)


@pytest.mark.parametrize(("route", "source"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("value", ["nvtx", "none", None])
def test_the_capture_range_belongs_to_nrlprof(route, source, value):
    error = rejection(route, "2", {"capture-range": value})
    assert error.source == f"{source}.capture-range"
    assert route("2", {"capture-range": "cudaProfilerApi"})["capture-range"] == "cudaProfilerApi"


def test_rlinf_flags_conflict_with_options_of_the_same_name():
    config = {"cluster": {"profiling": {"backend": "nsight", "worker_groups": ["G"], "steps": [1]}}}
    config["cluster"]["profiling"] |= {"flags": ["--trace"], "options": {"t": "cuda"}}
    with pytest.raises(ConfigError) as caught:
        plan_from_mapping(config)
    assert caught.value.source == "cluster.profiling.flags"
    config["cluster"]["profiling"]["flags"] = ["--python-backtrace"]
    assert plan_from_mapping(config).backend("nsys").flags == ("python-backtrace",)


@pytest.mark.parametrize("flag", ["", "a b", "a=b"])
def test_rlinf_flags_must_be_option_names(flag):
    config = {"cluster": {"profiling": {"backend": "nsight", "worker_groups": ["G"], "steps": [1], "flags": [flag]}}}
    with pytest.raises(ConfigError, match=r"cluster\.profiling\.flags"):
        plan_from_mapping(config)


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), 10**5000, {"a": 1}, "x\0y"], ids=["nan", "inf", "huge", "dict", "nul"]
)
def test_a_mapping_from_python_gets_the_same_value_checks(value):
    config = {"trainer": {"profile_steps": [1]}, "actor_rollout_ref": {"actor": {"profile_ranks": [0]}}}
    with pytest.raises(ConfigError) as caught:
        plan_from_mapping({**config, YAML_SOURCE: {"delay": value}})
    assert caught.value.source == f"{YAML_SOURCE}.delay"
    assert len(str(caught.value)) < 500


def test_rlinf_stop_on_range_end_alias_is_the_capture_range_end():
    from nrlprof.config.nsys.options import normalise_options
    from nrlprof.errors import ConfigError

    # RLinf's boolean: true stops at the end of the range, false lets nsys keep going
    assert normalise_options({"stop-on-range-end": True}, "options") == {"capture-range-end": "stop"}
    assert normalise_options({"stop-on-range-end": "true"}, "options") == {"capture-range-end": "stop"}
    assert normalise_options({"stop-on-range-end": False}, "options") == {"capture-range-end": "none"}
    assert normalise_options({"stop-on-range-end": None}, "options") == {"capture-range-end": None}
    with pytest.raises(ConfigError, match="capture-range-end"):
        normalise_options({"stop-on-range-end": True, "capture-range-end": "stop"}, "options")


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
    from nrlprof.config.nsys.options import steps_label
    from nrlprof.config.steps import parse_step_spec

    assert steps_label(parse_step_spec("3:5,10", "X")) == "3-4_10"
    assert steps_label(parse_step_spec("7", "X")) == "7"
    assert steps_label(None) == "all"


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
