"""Hostile or odd NRL_* values and config files: one ConfigError naming the input, never a raw exception."""

from __future__ import annotations

import math
import os
import tracemalloc

import pytest

from nrlprof.config.env import plan_from_env
from nrlprof.config.files import MAX_FILE_BYTES, plan_from_file
from nrlprof.config.plan import Plan
from nrlprof.config.steps import StepSelection, Window, parse_step_spec
from nrlprof.config.yaml_config import plan_from_mapping
from nrlprof.errors import ConfigError

NSYS = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "2:3"}
ROCPROF = {"NRL_ROCPROF_WORKER_PATTERNS": "*policy*"}
RLINF_FILE = "cluster:\n  profiling:\n    backend: nsight\n    worker_groups: [ActorGroup]\n    steps: [3]\n"


def rejected(environ: dict[str, str], variable: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        plan_from_env(environ)
    assert caught.value.source.split(".")[0] == variable
    return caught.value


# ---- NRL_PROFILE_TIMEOUT_S ----


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e7", "1000001", "0", "0.0", "-3", "abc", "1e999", "²"])
def test_bad_timeouts_are_rejected(text):
    error = rejected({"NRL_PROFILE_TIMEOUT_S": text}, "NRL_PROFILE_TIMEOUT_S")
    assert error.value == text
    assert "number of seconds > 0" in str(error)


@pytest.mark.parametrize(("text", "seconds"), [("0.5", 0.5), (" 30 ", 30.0), ("1000000", 1e6), ("1e3", 1000.0)])
def test_good_timeouts(text, seconds):
    assert plan_from_env({"NRL_PROFILE_TIMEOUT_S": text}).timeout_s == seconds


def test_a_timeout_from_the_config_survives_when_the_environment_has_none():
    assert plan_from_env({}, base=Plan(timeout_s=7.5)).timeout_s == 7.5
    assert plan_from_env({"NRL_PROFILE_TIMEOUT_S": "9"}, base=Plan(timeout_s=7.5)).timeout_s == 9.0


# ---- step selections stay windows ----


def test_ten_million_steps_parse_as_one_window_in_little_memory():
    tracemalloc.start()
    try:
        plan = plan_from_env({**NSYS, "NRL_NSYS_PROFILE_STEP_RANGE": "1:10000000"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    steps = plan.backend("nsys").steps
    assert steps.windows == (Window(1, 9_999_999),)
    assert peak < 1_000_000
    assert 1 in steps and 9_999_999 in steps and 5_000_000 in steps
    assert 10_000_000 not in steps and 0 not in steps
    assert steps.step_count == 9_999_999
    assert not hasattr(steps, "steps")


@pytest.mark.parametrize(
    ("spec", "windows"),
    [
        ("3:5,4:9,10", [(3, 8), (10, 10)]),
        ("3:5,4:10,10", [(3, 10)]),
        ("10,4:10,3:5", [(3, 10)]),
        ("1,5:8", [(1, 1), (5, 7)]),
        ("1,5:8,8:10", [(1, 1), (5, 9)]),
        ("1,5:8,6", [(1, 1), (5, 7)]),
        ("2:100,50:60", [(2, 99)]),
        ("1,3,5", [(1, 1), (3, 3), (5, 5)]),
    ],
)
def test_overlapping_and_adjacent_ranges_merge_into_maximal_windows(spec, windows):
    assert parse_step_spec(spec, "X").windows == tuple(Window(a, b) for a, b in windows)


def test_single_steps_merge_with_the_latest_window():
    assert StepSelection.from_steps([7, 1, 5, 6]).windows == (Window(1, 1), Window(5, 7))
    assert StepSelection.from_steps([1, 5, 6, 7, 9]).windows == (Window(1, 1), Window(5, 7), Window(9, 9))


def test_window_of_and_membership_at_the_edges():
    steps = parse_step_spec("3:5,10,20:22", "X")
    expected = {2: None, 3: Window(3, 4), 4: Window(3, 4), 5: None, 9: None, 10: Window(10, 10), 11: None}
    expected |= {19: None, 20: Window(20, 21), 21: Window(20, 21), 22: None}
    for step, window in expected.items():
        assert steps.window_of(step) == window
        assert (step in steps) is (window is not None)
    assert "3" not in steps


@pytest.mark.parametrize(
    "spec",
    [
        "-" + "0" * 5000 + "1",
        "1:" + "9" * 5000,
        "9" * 5000,
        "99999999999",
        "2147483648",
        "1:2147483649",
        "²",
        "1:²",
        "\u0661",
        "1.5",
    ],
)
def test_step_numbers_that_are_not_small_integers_are_rejected(spec):
    error = rejected({**NSYS, "NRL_NSYS_PROFILE_STEP_RANGE": spec}, "NRL_NSYS_PROFILE_STEP_RANGE")
    assert error.value == spec


@pytest.mark.parametrize("spec", ["0" * 5000 + "1:3", "1:" + "0" * 5000 + "3", "+1:3", "01:003"])
def test_leading_zeros_and_plus_signs_are_read_as_decimal(spec):
    steps = plan_from_env({**NSYS, "NRL_NSYS_PROFILE_STEP_RANGE": spec}).backend("nsys").steps
    assert steps.windows == (Window(1, 2),)


def test_the_largest_step_is_accepted():
    steps = plan_from_env({**NSYS, "NRL_NSYS_PROFILE_STEP_RANGE": "2147483646:2147483648"}).backend("nsys").steps
    assert steps.windows == (Window(2_147_483_646, 2_147_483_647),)


# ---- ranks, patterns, booleans ----


@pytest.mark.parametrize("text", ["²", "\u0663", "0" * 5000 + "1" * 11, "9" * 5000, "99999999999", "+1", "1 2", "0x1"])
def test_ranks_that_are_not_small_decimal_integers_are_rejected(text):
    error = rejected({**NSYS, "NRL_NSYS_RANKS": text}, "NRL_NSYS_RANKS")
    assert "a comma list of ranks" in str(error)


@pytest.mark.parametrize(
    ("text", "ranks"), [(" 0 , ,2 ", {0, 2}), ("3,,", {3}), (",1", {1}), ("007", {7}), ("0" * 5000 + "4", {4})]
)
def test_rank_items_are_stripped_and_empty_items_skipped(text, ranks):
    target = plan_from_env({**NSYS, "NRL_NSYS_RANKS": text}).backend("nsys").targets[0]
    assert target.ranks == frozenset(ranks)


def test_pattern_and_method_items_are_stripped_and_empty_items_skipped():
    environ = {**NSYS, "NRL_NSYS_WORKER_PATTERNS": ",a , ,b,", "NRL_NSYS_DISCRETE_METHODS": " f ,,g "}
    targets = plan_from_env(environ).backend("nsys").targets
    assert [(t.pattern, t.methods) for t in targets] == [("a", ("f", "g")), ("b", ("f", "g"))]


@pytest.mark.parametrize(
    ("word", "value"),
    [
        *[("1", True), ("true", True), ("yes", True), ("on", True), (" YES ", True), ("On", True)],
        *[("0", False), ("false", False), ("no", False), ("off", False), ("OFF", False), ("False", False)],
    ],
)
def test_each_bool_word(word, value):
    plan = plan_from_env({"NRL_TORCH_PROFILE_WITH_STACK": word})
    assert plan.torch.with_stack is value
    assert plan_from_env({**NSYS, "NRL_NSYS_DISCRETE": word}).backend("nsys").targets[0].discrete is value


@pytest.mark.parametrize("word", ["2", "y", "n", "enable", "truee", "-1"])
def test_other_bool_words_are_rejected(word):
    rejected({"NRL_TORCH_PROFILE_GZIP": word}, "NRL_TORCH_PROFILE_GZIP")


# ---- JSON option variables ----


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
        ('{"t": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply"),
        ('{"t": NaN}', "not a finite number"),
        ('{"t": Infinity}', "not a finite number"),
        ('{"t": -Infinity}', "not a finite number"),
        ('{"t": 1e999}', "not a finite number"),
        ('{"t": ' + "9" * 5000 + "}", "not usable JSON"),
        ('{"": "x"}', "Expected a non-empty option name"),
        ('{"--": "x"}', "Expected a non-empty option name"),
        ('{"t x": "cuda"}', "Expected a non-empty option name"),
        ('{"t=cuda": true}', "Expected a non-empty option name"),
        ('{"t": "cuda\\u0000"}', "NUL"),
        ('{"t": {"a": 1}}', "a string, finite number or boolean"),
    ],
)
def test_bad_nsys_extra_options(text, detail):
    error = rejected({**NSYS, "NRL_NSYS_EXTRA_OPTIONS": text}, "NRL_NSYS_EXTRA_OPTIONS")
    assert detail in str(error)
    assert len(str(error)) < 1000


def test_rocprof_args_get_the_same_option_checks():
    rejected({**ROCPROF, "NRL_ROCPROF_ARGS": '{"T": NaN}'}, "NRL_ROCPROF_ARGS")
    rejected({**ROCPROF, "NRL_ROCPROF_ARGS": '{"": 1}'}, "NRL_ROCPROF_ARGS")


@pytest.mark.parametrize(
    "text",
    [
        '{"A": null}',
        '{"A": {"b": 1}}',
        '{"A": [1]}',
        '{"A=B": "1"}',
        '{"": "1"}',
        '{"A\\u0000B": "1"}',
        '{"A": "x\\u0000y"}',
        '{"A": 1e999}',
        "[1]",
    ],
)
def test_bad_rocprof_environment(text):
    rejected({**ROCPROF, "NRL_ROCPROF_ENV": text}, "NRL_ROCPROF_ENV")


def test_rocprof_environment_values_become_text():
    environ = {**ROCPROF, "NRL_ROCPROF_ENV": '{"A": "x", "B": 100, "C": true, "D": 0.5}'}
    assert plan_from_env(environ).backend("rocprof").env == (("A", "x"), ("B", "100"), ("C", "true"), ("D", "0.5"))


# ---- NRL_PROFILE_CONFIG files ----


def file_error(spec: str) -> str:
    with pytest.raises(ConfigError) as caught:
        plan_from_file(spec)
    assert caught.value.source == "NRL_PROFILE_CONFIG"
    return str(caught.value)


def test_a_device_is_not_read():
    assert "not a regular file" in file_error("/dev/zero")
    assert "not a regular file" in file_error("/dev/zero:cluster.profiling")


def test_a_fifo_is_not_opened(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in file_error(str(fifo))


def test_a_huge_file_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "sparse.yaml"
    with open(path, "wb") as handle:
        handle.truncate(64 * 1024 * 1024)
    tracemalloc.start()
    try:
        message = file_error(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "larger than" in message
    assert peak < 3 * MAX_FILE_BYTES


def test_a_file_over_the_size_bound_is_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(RLINF_FILE + "#" * MAX_FILE_BYTES + "\n")
    assert f"larger than {MAX_FILE_BYTES} bytes" in file_error(str(path))


ALIAS_LINES = [f"{b}: &{b} [{', '.join(['*' + a] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
ALIAS_BOMB = "\n".join(["x: ${a}", "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]", *ALIAS_LINES]) + "\n"


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 700
    assert "once its aliases are expanded" in file_error(str(path))


def test_a_recursive_yaml_alias_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n" + RLINF_FILE)
    assert "refers to a node that contains it" in file_error(str(path))


def test_yaml_names_are_stripped():
    config = {"cluster": {"profiling": {"backend": "nsight", "worker_groups": [" ActorGroup "], "steps": [1]}}}
    plan = plan_from_mapping(config)
    assert [t.pattern for t in plan.backend("nsys").targets] == ["ActorGroup", "ActorGroup:*"]


def test_ordinary_yaml_anchors_still_work(tmp_path):
    path = tmp_path / "anchors.yaml"
    path.write_text(
        "groups: &groups [ActorGroup]\n"
        "cluster:\n  profiling:\n    backend: nsight\n    worker_groups: *groups\n    steps: [3, 4]\n"
    )
    plan = plan_from_file(str(path))
    assert [t.pattern for t in plan.backend("nsys").targets] == ["ActorGroup", "ActorGroup:*"]


@pytest.mark.parametrize("depth", [200, 20_000])
def test_deeply_nested_yaml_is_refused(tmp_path, depth):
    path = tmp_path / "deep.yaml"
    path.write_text(RLINF_FILE + "x: " + "[" * depth + "]" * depth + "\n")
    assert "nested deeper than" in file_error(str(path))


def test_deeply_nested_block_yaml_is_refused(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text(RLINF_FILE + "".join(" " * i + f"k{i}:\n" for i in range(1000)))
    assert "nested deeper than" in file_error(str(path))


def test_a_huge_yaml_integer_is_refused(tmp_path):
    path = tmp_path / "int.yaml"
    path.write_text(RLINF_FILE.replace("steps: [3]", "steps: [" + "9" * 5000 + "]"))
    assert "invalid YAML" in file_error(str(path))


def test_a_yaml_step_beyond_the_bound_is_refused(tmp_path):
    path = tmp_path / "step.yaml"
    path.write_text(RLINF_FILE.replace("steps: [3]", "steps: [" + "9" * 400 + "]"))
    with pytest.raises(ConfigError, match=r"cluster\.profiling\.steps"):
        plan_from_file(str(path))


def test_non_finite_yaml_options_are_refused(tmp_path):
    path = tmp_path / "nan.yaml"
    path.write_text(RLINF_FILE + "    options: {delay: .nan}\n")
    with pytest.raises(ConfigError, match=r"options\.delay=nan") as caught:
        plan_from_file(str(path))
    assert "not a finite number" in str(caught.value)
    assert math.isnan(caught.value.value)


def test_each_step_its_own_window_is_bounded():
    config = {
        "trainer": {"profile_steps": "1:20002"},
        "global_profiler": {"profile_continuous_steps": False},
        "actor_rollout_ref": {"actor": {"profile_ranks": [0]}},
    }
    with pytest.raises(ConfigError, match=r"global_profiler\.profile_continuous_steps=False") as caught:
        plan_from_mapping(config)
    assert "20001 steps" in str(caught.value)
    config["trainer"]["profile_steps"] = [1, 2, 5]
    assert plan_from_mapping(config).backend("nsys").steps.windows == (Window(1, 1), Window(2, 2), Window(5, 5))


def test_an_output_dir_with_nul_is_refused():
    config = {"cluster": {"profiling": {"backend": "nsight", "worker_groups": ["G"], "output_dir": "a\0b"}}}
    with pytest.raises(ConfigError, match=r"cluster\.profiling\.output_dir"):
        plan_from_mapping(config)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("NRL_NSYS_PROFILE_STEP_RANGE", "a:b"),
        ("NRL_NSYS_PROFILE_STEP_RANGE", "1:2:3"),
        ("NRL_NSYS_PROFILE_STEP_RANGE", ","),
        ("NRL_NSYS_PROFILE_STEP_RANGE", "0"),
        ("NRL_NSYS_RANKS", "x"),
        ("NRL_NSYS_RANKS", ","),
        ("NRL_NSYS_DISCRETE", "maybe"),
        ("NRL_NSYS_EXTRA_OPTIONS", "not json"),
        ("NRL_NSYS_EXTRA_OPTIONS", "[1]"),
        ("NRL_PROFILE_TIMEOUT_S", "abc"),
        ("NRL_PROFILE_LOG_LEVEL", "LOUD"),
    ],
)
def test_an_error_names_its_variable_once(variable, value):
    with pytest.raises(ConfigError) as caught:
        plan_from_env({**NSYS, variable: value})
    message = str(caught.value)
    assert message.startswith(f"{variable}={value!r} is invalid")
    assert message.count(variable) == 1
    assert "Error parsing" not in message


@pytest.mark.parametrize("backend", [{"nsight": []}, ["nsight"], 3, None])
def test_an_rlinf_backend_that_is_not_a_name_is_refused(backend):
    with pytest.raises(ConfigError, match=r"cluster\.profiling\.backend"):
        plan_from_mapping({"cluster": {"profiling": {"backend": backend, "worker_groups": ["G"]}}})


@pytest.mark.parametrize("text", ["a: !!timestamp 2001-12-14!!set\n", "a: !!python/object:os.system x\n", "\0"])
def test_malformed_or_unsafe_yaml_is_a_config_error(tmp_path, text):
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    assert "invalid YAML" in file_error(str(path))


INTERPOLATION_LINES = [f"l{i + 1}: '" + ("${l" + str(i) + "}") * 10 + "'" for i in range(9)]
INTERPOLATION_BOMB = "\n".join(["l0: 'xxxxxxxxxx'", *INTERPOLATION_LINES]) + "\n"


def test_an_interpolation_bomb_is_refused_before_resolving(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(RLINF_FILE + INTERPOLATION_BOMB)
    assert len(INTERPOLATION_BOMB) < 700
    assert "interpolations expand to more than" in file_error(str(path))


@pytest.mark.parametrize("reference", ["${shared.groups}", "${oc.select:shared.groups,null}", "${..groups}"])
def test_interpolations_that_copy_a_little_still_resolve(tmp_path, reference):
    path = tmp_path / "shared.yaml"
    groups = "shared:\n  groups: [ActorGroup]\n" if reference != "${..groups}" else "groups: [ActorGroup]\n"
    section = "cluster:\n  profiling:\n    backend: nsight\n    steps: [3]\n"
    if reference == "${..groups}":
        section = "cluster:\n  groups: [ActorGroup]\n  profiling:\n    backend: nsight\n    steps: [3]\n"
        groups = ""
    path.write_text(groups + section + f"    worker_groups: '{reference}'\n")
    plan = plan_from_file(str(path))
    assert [t.pattern for t in plan.backend("nsys").targets] == ["ActorGroup", "ActorGroup:*"]


def test_a_long_chain_of_interpolations_is_a_config_error(tmp_path):
    path = tmp_path / "chain.yaml"
    path.write_text(RLINF_FILE + "a0: x\n" + "".join(f"a{i + 1}: ${{a{i}}}\n" for i in range(5000)))
    with pytest.raises(ConfigError):
        plan_from_file(str(path))


RELATIVE_LINES = [f"  l{i + 1}: {{v: '" + ("${..l" + str(i) + ".v}") * 10 + "'}" for i in range(7)]
RELATIVE_BOMB = "\n".join(["b:", "  l0: {v: xxxxxxxxxx}", *RELATIVE_LINES]) + "\n"


def test_an_interpolation_bomb_of_relative_references_is_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(RLINF_FILE + RELATIVE_BOMB)
    assert "interpolations expand to more than" in file_error(str(path))


def test_many_windows_name_their_span_in_file_names():
    from nrlprof.config.nsys.options import steps_label
    from nrlprof.config.steps import parse_step_spec

    assert steps_label(parse_step_spec("1,3,5", "V")) == "1_3_5"
    assert steps_label(parse_step_spec(",".join(str(n) for n in range(1, 200, 2)), "V")) == "1-199"


def test_a_huge_value_is_shown_cut_in_the_error():
    import sys

    from nrlprof.errors import ConfigError

    assert len(str(ConfigError("KEY", "x" * 1_000_000, "a short string"))) < 400
    if hasattr(sys, "set_int_max_str_digits"):
        huge = 10 ** (sys.get_int_max_str_digits() + 10) if sys.get_int_max_str_digits() else 10**5000
        assert "too large to show" in str(ConfigError("KEY", huge, "a small number"))
