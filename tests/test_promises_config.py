"""README promises checked without a cluster: `nrlprof plan` as a command, the switch words, list parsing,
the timeout's bounds, the RLinf alias, windows from lists, and matching by an explicit name."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

NRLPROF = Path(sys.executable).parent / "nrlprof"
EACH_NODE = "each node running a matched worker"


def plan(variables: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "RAY_ADDRESS"))} | variables
    return subprocess.run([str(NRLPROF), "plan", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def plan_json(variables: dict[str, str], cwd: Path | None = None) -> list[dict]:
    done = plan(variables, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["backends"]


def option_value(command: str, name: str) -> str:
    """The value of `-o X` or `--name=X` in a shell command line."""
    argv = shlex.split(command)
    if name.startswith("--"):
        (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
        return value
    return argv[argv.index(name) + 1]


def test_plan_command_one_window_renders_stop_and_the_report_name():
    (nsys,) = plan_json({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"})
    assert nsys["kind"] == "nsys" and nsys["windows"] == ["3-4"]
    argv = shlex.split(nsys["command"])
    assert argv[:2] == ["nsys", "profile"]
    assert option_value(nsys["command"], "-t") == "cuda,nvtx"
    assert option_value(nsys["command"], "--capture-range") == "cudaProfilerApi"
    assert option_value(nsys["command"], "--capture-range-end") == "stop"
    output = option_value(nsys["command"], "-o")
    assert output.endswith("/logs/nsight/<worker>_3-4_%p")
    assert output.replace("<worker>", "dtensor_policy_worker").endswith("/dtensor_policy_worker_3-4_%p")
    # the worker's own interpreter, kept (not this CLI's: a worker may run a venv of its own)
    assert argv[-2:] == ["default_worker.py", "..."] and argv[-3] == "<python>"
    folder = output.rsplit("/", 1)[0]
    assert nsys["files"] == [{"node": EACH_NODE, "path": f"{folder}/<worker>_3-4_<pid>.nsys-rep"}]


def test_plan_command_two_windows_render_repeat_and_one_numbered_report_each():
    variables = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5,10"}
    (nsys,) = plan_json(variables)
    assert nsys["windows"] == ["3-4", "10"]
    assert option_value(nsys["command"], "--capture-range-end") == "repeat:2"
    output = option_value(nsys["command"], "-o")
    assert output.endswith("/<worker>_3-4_10_%p")
    folder = output.rsplit("/", 1)[0]
    assert [f["path"] for f in nsys["files"]] == [
        f"{folder}/<worker>_3-4_10_<pid>.1.nsys-rep",
        f"{folder}/<worker>_3-4_10_<pid>.2.nsys-rep",
    ]


def test_plan_command_text_output_shows_windows_command_and_files():
    variables = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5,10", "NRL_NSYS_RANKS": "0"}
    done = plan(variables)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # the table wraps lines to the terminal width
    assert "windows: 3-4, 10 " in text
    assert "--capture-range-end=repeat:2" in text and "<worker>_3-4_10_%p" in text
    assert "<worker>_3-4_10_<pid>.1.nsys-rep" in text and "<worker>_3-4_10_<pid>.2.nsys-rep" in text
    assert "*policy*" in text and "[0]" in text


def test_plan_command_torch_files_per_window_relative_dir_resolved_against_the_working_directory(tmp_path):
    variables = {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
        "NRL_TORCH_PROFILE_STEP_RANGE": "3:5,10",
        "NRL_TORCH_PROFILE_DIR": "traces",
        "NRL_TORCH_PROFILE_GZIP": "yes",
    }
    (torch,) = plan_json(variables, cwd=tmp_path)
    folder = tmp_path.resolve() / "traces"
    worker = f"{folder}/<worker>/<rank>/<worker>.rank<rank>"
    assert sorted(f["path"] for f in torch["files"]) == sorted(
        [
            f"{worker}.steps3-4.<pid>.pt.trace.json.gz",
            f"{worker}.steps10.<pid>.pt.trace.json.gz",
            f"{folder}/controller.steps3-4.<pid>.pt.trace.json.gz",
            f"{folder}/controller.steps10.<pid>.pt.trace.json.gz",
        ]
    )


def test_plan_command_rocprof_default_prefix():
    (rocprof,) = plan_json({"NRL_ROCPROF_WORKER_PATTERNS": "*policy*"})
    assert "ROCPROFSYS_OUTPUT_PREFIX=WORKER_rank0_" in shlex.split(rocprof["command"])
    (row,) = rocprof["files"]
    assert row["path"].endswith("/logs/rocprof_sys/<worker>_rank<rank>_*")


def test_plan_command_bad_variable_exits_2_naming_it():
    done = plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "5:3"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "NRL_NSYS_PROFILE_STEP_RANGE" in done.stderr and "5:3" in done.stderr


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


def test_rlinf_stop_on_range_end_alias_is_the_capture_range_end():
    from nrlprof.config.nsys_options import normalise_options
    from nrlprof.errors import ConfigError

    # RLinf's boolean: true stops at the end of the range, false lets nsys keep going
    assert normalise_options({"stop-on-range-end": True}, "options") == {"capture-range-end": "stop"}
    assert normalise_options({"stop-on-range-end": "true"}, "options") == {"capture-range-end": "stop"}
    assert normalise_options({"stop-on-range-end": False}, "options") == {"capture-range-end": "none"}
    assert normalise_options({"stop-on-range-end": None}, "options") == {"capture-range-end": None}
    with pytest.raises(ConfigError, match="capture-range-end"):
        normalise_options({"stop-on-range-end": True, "capture-range-end": "stop"}, "options")


def test_an_explicit_name_is_matched_and_names_the_files():
    from nrlprof.config.env import plan_from_env
    from nrlprof.workers.identity import WorkerIdentity
    from nrlprof.workers.matching import match_worker

    plan_ = plan_from_env({"NRL_NSYS_WORKER_PATTERNS": "vllm_generation_worker", "NRL_NSYS_PROFILE_STEP_RANGE": "2"})
    named = WorkerIdentity("Worker", None, 0, explicit_name="vllm_generation_worker")
    assert [m.target.pattern for m in match_worker(plan_, named)] == ["vllm_generation_worker"]
    assert named.name == "vllm_generation_worker" and named.file_name == "vllm_generation_worker"
    assert not match_worker(plan_, WorkerIdentity("Worker", None, 0))
