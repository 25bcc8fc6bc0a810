"""`nrlprof plan` tells the whole plan and catches mistakes before the job starts (issue 24): every NRL_* variable it
does not read, an nsys option the installed nsys does not know (also in `doctor`), the step anatomy, where the steps
come from, the controller, the torch switches, the workers' interpreter, a Hydra-composed verl YAML, and JSON
always under --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.environment import environment_without

from nrlprof.config.env import load_plan
from nrlprof.config.nsys.known import NsysOptions, parse_profile_help, read_profile_help, unknown_nsys_options
from nrlprof.tools.check.doctor import ERROR, DoctorReport, NodeCheck, node_problems
from nrlprof.tools.check.node import ToolCheck

NSYS = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}
TORCH = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "3:5"}
NO_NSYS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def plan(variables: dict[str, str], *args: str, path: str = NO_NSYS_PATH) -> subprocess.CompletedProcess:
    env = environment_without("NRL_", "RAY_ADDRESS")
    env |= {"PATH": path, "COLUMNS": "300"} | variables
    return subprocess.run([sys.executable, "-m", "nrlprof", "plan", *args], capture_output=True, text=True, env=env,
                          timeout=300)  # fmt: skip


def plan_json(variables: dict[str, str], **kwargs: str) -> tuple[int, dict]:
    done = plan(variables, "--json", **kwargs)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_every_nrl_variable_nrlprof_does_not_read_is_listed():
    status, data = plan_json({**NSYS, "NRL_NSYS_RANK": "0", "NRL_FORCE_REBUILD_VENVS": "1"})
    assert data["unknown_variables"] == [{"name": "NRL_FORCE_REBUILD_VENVS", "closest": None},
                                         {"name": "NRL_NSYS_RANK", "closest": "NRL_NSYS_RANKS"}]  # fmt: skip
    assert status == 1  # a misspelling is a problem found
    text = plan({**NSYS, "NRL_NSYS_RANK": "0"}).stdout
    assert "warning: NRL_NSYS_RANK is not an nrlprof variable: did you mean NRL_NSYS_RANKS?" in text
    status, data = plan_json({**NSYS, "NRL_FORCE_REBUILD_VENVS": "1"})  # a framework's own: said, not a problem
    assert status == 0 and data["unknown_variables"][0]["closest"] is None


def test_the_stand_in_answers_nsys_profile_help_as_nsys_does(stand_in_env):
    done = subprocess.run([str(stand_in_env["bin"] / "nsys"), "profile", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: nsys profile [<args>] [application]")
    assert "\t-t, --trace=\n\n\t   Possible values are" in done.stdout and "\t--capture-range-end=\n" in done.stdout
    known = parse_profile_help(done.stdout)
    assert known is not None and {"trace", "capture-range-end", "cuda-memory-usage", "python-backtrace"} <= known.long
    assert {"t", "o", "s", "c"} <= known.short and not known.knows("bogus-option")
    refused = subprocess.run([str(stand_in_env["bin"] / "nsys"), "profile", "--bogus-option=1", "python3", "-c", ""],
                             capture_output=True, text=True)  # fmt: skip
    assert refused.returncode == 1 and "unrecognised option '--bogus-option'" in refused.stderr


@pytest.mark.parametrize(
    "help_text",
    [
        "usage: nsys profile [<args>]\nargs:\n\t-t, --trace=\n\n\t   x\n\t--capture-range-end=\n",
        "usage: nsys profile [<args>]\n  -t [ --trace ] arg (=cuda)\n  --capture-range-end arg\n",
        "usage: nsys profile [<args>]\n  -t, --trace arg (=cuda)\n      Use --no-such in prose.\n"
        "  --capture-range-end arg",
    ],
    ids=["2025", "boost", "boost-comma"],
)
def test_nsys_help_is_read_in_each_layout(help_text):
    filler = "".join(f"\t--option-{n}=\n" for n in range(10)) + "\t-o, --output=\n"
    known = parse_profile_help(help_text + "\n" + filler)
    assert known is not None and {"trace", "capture-range-end", "output"} <= known.long
    assert "t" in known.short and "no-such" not in known.long
    assert parse_profile_help("nsys: command not found") is None


def test_an_nsys_option_the_installed_nsys_does_not_know_is_an_error_in_plan(stand_in_env):
    bad = {**NSYS, "NRL_NSYS_EXTRA_OPTIONS": '{"bogus-option": 1, "cuda-memory-usage": true}'}
    done = plan(bad, path=stand_in_env["PATH"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "'--bogus-option' is invalid" in done.stderr and "does not know it" in done.stderr
    near = plan({**NSYS, "NRL_NSYS_EXTRA_OPTIONS": '{"cuda-memory-usag": true}'}, path=stand_in_env["PATH"])
    assert near.returncode == 2 and "did you mean '--cuda-memory-usage'?" in near.stderr
    good = {**NSYS, "NRL_NSYS_EXTRA_OPTIONS": '{"cuda-memory-usage": true, "s": "none"}'}
    status, data = plan_json(good, path=stand_in_env["PATH"])
    assert status == 0 and data["nsys_options_checked"].startswith("every nsys option is one")
    status, data = plan_json(bad)  # no nsys here: nothing to check against, and said so
    assert status == 0 and data["nsys_options_checked"].startswith("nsys not found here")


def test_doctor_finds_an_nsys_option_a_node_does_not_know(stand_in_env):
    known, why = read_profile_help(str(stand_in_env["bin"] / "nsys"))
    assert known is not None, why
    check = NodeCheck("node-a", "n" * 56, "10.0.0.1", "node-a", nsys=ToolCheck("nsys", "/opt/nsys", "2025.3.1"),
                      nsys_options={"long": sorted(known.long), "short": sorted(known.short)}, agent_fix=True,
                      cuda=True, output_writable=True, python_version="3.11.0")  # fmt: skip
    bad = load_plan({**NSYS, "NRL_NSYS_EXTRA_OPTIONS": '{"bogus-option": 1}'})
    report = DoctorReport(True, [], "/tmp", "3.11.0", "python")
    (problem,) = node_problems(check, bad, report, output_dir_given=False)
    assert problem.severity == ERROR and "--bogus-option" in problem.message and problem.node == "node-a"
    assert node_problems(check, load_plan(NSYS), report, output_dir_given=False) == []
    unknown = unknown_nsys_options(bad, NsysOptions(frozenset({"trace"}), frozenset()))
    assert sorted(unknown) == ["--bogus-option", "--capture-range", "--capture-range-end", "-t"]


@pytest.mark.parametrize(
    "variables",
    [{}, {"NRL_TORCH_PROFILE_DIR": "/tmp/x"}],
    ids=["nothing", "a directory only"],
)
def test_nothing_is_configured_only_when_nothing_is_and_json_always(variables):
    done = plan(variables)
    assert done.returncode == 0 and done.stdout.startswith("nothing is configured")
    _, data = plan_json(variables)
    assert data["configured"] is False and data["backends"] == []


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"NRL_STEP_ANATOMY": "1"}, "step anatomy: on"),
        ({"NRL_STEP_METHOD": "*policy*.train"}, "else the step marker NRL_STEP_METHOD='*policy*.train'"),
        ({"NRL_PROFILE_FRAMEWORK_CONFIG": "1"}, "NRL_PROFILE_FRAMEWORK_CONFIG=1: the workers and steps"),
        ({"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_MEMORY_PROFILE_STEP_RANGE": "3:5"}, "memory"),
    ],
    ids=["anatomy", "step marker", "framework config", "memory"],
)
def test_a_plan_without_a_profiler_is_still_a_plan(variables, says):
    done = plan(variables)
    assert done.returncode == 0 and "nothing is configured" not in done.stdout
    assert says in " ".join(done.stdout.split())
    _, data = plan_json(variables)
    assert data["configured"] is True


def test_plan_tells_the_whole_plan():
    variables = {**NSYS, **TORCH, "NRL_TORCH_PROFILE_RECORD_SHAPES": "1", "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*p*",
                 "NRL_MEMORY_PROFILE_STEP_RANGE": "3:5"}  # fmt: skip
    _, data = plan_json(variables)
    assert [b["kind"] for b in data["backends"]] == ["nsys", "torch", "memory"]
    assert data["anatomy"]["enabled"] and data["anatomy"]["why"] == "on by default: a backend is configured"
    steps = data["steps"]
    assert steps[0].startswith("an explicit `nrlprof.step(n)`") and "verl's trainers" in steps[2]
    controller = " ".join(data["controller"])
    assert "torch traces of the controller's own windows are captured" in controller
    assert "nsys: the controller is captured only when it runs under nsys itself" in controller
    assert data["torch"]["record_shapes"] is True and data["torch"]["with_stack"] is False
    assert "each worker runs its own interpreter" in data["interpreter"]
    nsys_command = data["backends"][0]["command"]
    assert " <python> default_worker.py" in nsys_command and sys.executable not in nsys_command
    text = " ".join(plan(variables).stdout.split())
    for line in ("step anatomy: on", "steps, in order of precedence:", "controller:",
                 "torch switches: record_shapes on", "interpreter: each worker runs its own interpreter"):  # fmt: skip
        assert line in text, line


def test_a_hydra_composed_verl_yaml_says_what_was_found_and_what_could_not_be_read(tmp_path):
    config = tmp_path / "ppo.yaml"
    config.write_text("defaults:\n  - actor@actor_rollout_ref.actor: dp_actor\n  - _self_\n"
                      "trainer:\n  profile_steps: [2, 3]\n")  # fmt: skip
    done = plan({"NRL_PROFILE_CONFIG": str(config)})
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "nothing is configured" not in text
    assert "found: trainer.profile_steps: [2, 3]" in text
    assert "could not read: the Hydra `defaults` it composes (actor@actor_rollout_ref.actor: dp_actor" in text
    assert "--cfg job" in text and "NRL_PROFILE_FRAMEWORK_CONFIG=1" in text
    _, data = plan_json({"NRL_PROFILE_CONFIG": str(config)})
    assert data["config_file"]["path"] == str(config) and data["config_file"]["backends"] == []


class VenvPolicyWorker:
    def ready(self) -> bool:
        return True


def test_plan_address_shows_each_live_actors_interpreter(ray_cluster):
    worker = ray_cluster.remote(num_cpus=0)(VenvPolicyWorker)
    venv = worker.options(runtime_env={"py_executable": sys.executable}).remote()
    own = worker.remote()
    ray_cluster.get([venv.ready.remote(), own.ready.remote()])
    try:
        token = {"RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}
        address = ray_cluster.get_runtime_context().gcs_address
        done = plan({**TORCH, **token}, "--address", address, "--json")
        assert done.returncode == 0, done.stderr
        rows = [r for r in json.loads(done.stdout)["live"] if r["worker"] == "venv_policy_worker"]
        assert sorted(str(r["interpreter"]) for r in rows) == sorted([sys.executable, "None"])
    finally:
        for actor in (venv, own):
            ray_cluster.kill(actor)


def test_plan_json_is_json_on_every_route(tmp_path):
    for variables in ({}, {"NRL_STEP_ANATOMY": "1"}, NSYS, {"NRL_PROFILE_CONFIG": str(Path(tmp_path / "x"))}):
        done = plan(variables, "--json")
        if done.returncode == 2:  # bad input: one line on stderr, nothing on stdout
            assert done.stdout == "" and done.stderr.startswith("nrlprof plan: ")
        else:
            json.loads(done.stdout)


def test_plan_shows_the_options_a_controller_actor_runs_under_nsys_with():
    import dataclasses

    from nrlprof.tools.plan.overview import controller_capture

    plan = load_plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "2:3"})
    plan = dataclasses.replace(plan, controller_nsys=(("t", "cuda,nvtx"), ("o", "controller run")))
    assert controller_capture(plan)[-1] == (
        "nsys: a controller actor runs under nsys with the controller's options: -t cuda,nvtx -o 'controller run'"
    )
