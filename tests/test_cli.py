"""The `nrlprof` command: exit codes decided in one place, and only the chosen subcommand imported."""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nrlprof import cli

TOOL_MODULES = {module for module, _ in cli.SUBCOMMANDS.values()}
IMPORTS_OF_A_COMMAND = Path(__file__).parent / "programs" / "modules_a_command_imports.py"


def imported_after(argv: list[str]) -> tuple[int, set[str]]:
    """Exit status of `nrlprof <argv>` in a fresh interpreter, and the nrlprof/ray/torch modules it imported."""
    done = subprocess.run([sys.executable, str(IMPORTS_OF_A_COMMAND), *argv], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    status, names = json.loads(done.stdout)
    return status, set(names)


def test_a_subcommand_imports_its_own_module_only(tmp_path):
    status, modules = imported_after(["merge", str(tmp_path / "missing"), "-o", str(tmp_path / "t.json")])
    assert status == 2
    assert "nrlprof.tools.commands.merge" in modules
    assert not (TOOL_MODULES - {"nrlprof.tools.commands.merge"}) & modules
    assert not {m for m in modules if m == "ray" or m.startswith(("ray.", "torch"))}


def test_help_lists_every_subcommand_and_imports_none():
    status, modules = imported_after(["--help"])
    assert status == 0 and not TOOL_MODULES & modules
    done = subprocess.run([sys.executable, "-m", "nrlprof", "--help"], capture_output=True, text=True, timeout=300)
    for name in ("doctor", "plan", "patch-ray", "collect", "merge", "summary", "report", "demo"):
        assert name in done.stdout


def test_a_subcommand_gets_its_own_options():
    args = cli.build_parser("patch-ray").parse_args(["patch-ray", "--check", "--ray-dir", "/opt/ray"])
    assert (args.check, args.revert, args.ray_dir) == (True, False, "/opt/ray")
    assert cli.chosen_command(["--version"]) is None
    assert cli.chosen_command(["summary", "--json", "merge"]) == "summary"
    assert cli.chosen_command(["no-such-command"]) is None


def test_unknown_command_is_bad_input(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["no-such-command"])
    assert exit.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_config_error_is_one_line_and_exit_code_2(tmp_path):
    env = {**os.environ, "NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "abc"}
    done = subprocess.run([sys.executable, "-m", "nrlprof", "plan"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("nrlprof plan: ")
    assert "NRL_NSYS_PROFILE_STEP_RANGE" in done.stderr and "abc" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def fixture_tool(monkeypatch):
    monkeypatch.setitem(cli.SUBCOMMANDS, "fixture", ("helpers.fixture_subcommand", "a tool for this test"))
    return "fixture"


@pytest.mark.parametrize(
    "outcome, status, stderr",
    [
        ("ok", 0, ""),
        ("none", 0, ""),
        ("partial", 1, ""),
        ("tool-error", 2, "nrlprof fixture: /data/x.json: not a trace: second line\n"),
        ("config-error", 2, "nrlprof fixture: NRL_X='y' is invalid. Expected an integer.\n"),
        ("interrupt", 130, "nrlprof fixture: interrupted\n"),
    ],
)
def test_outcomes_map_to_exit_codes_in_one_place(fixture_tool, capsys, outcome, status, stderr):
    assert cli.main([fixture_tool, outcome]) == status
    assert capsys.readouterr().err == stderr


def test_one_exit_code_table_for_every_command():
    from nrlprof import exit_codes
    from nrlprof.rayfix import patch_ray

    # patch-ray runs on the standard library alone, so it keeps the table's meanings in constants of its own
    assert (patch_ray.EXIT_OK, patch_ray.EXIT_UNFIXED, patch_ray.EXIT_FAILED) == (
        exit_codes.OK,
        exit_codes.PARTIAL,
        exit_codes.BAD_INPUT,
    )
    assert [exit_codes.outcome(True), exit_codes.outcome(False)] == [exit_codes.OK, exit_codes.PARTIAL]
    help_text = cli.build_parser("").format_help()
    assert all(meaning.split(":")[0] in " ".join(help_text.split()) for meaning in exit_codes.MEANINGS.values())
    # no command returns a number of its own: each returns the table's names
    package = Path(cli.__file__).parent
    for path in [*(package / "tools" / "commands").glob("*.py"), package / "demo" / "cli.py"]:
        tree = ast.parse(path.read_text())
        returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant)]
        numbers = [n.lineno for n in returns if type(n.value.value) is int]
        assert numbers == [], f"{path.name}:{numbers}: return a name of nrlprof.exit_codes"


def test_an_unexpected_exception_is_not_reported_as_bad_input(fixture_tool):
    with pytest.raises(ValueError, match="a bug"):
        cli.main([fixture_tool, "value-error"])


def test_python_dash_m_nrlprof_is_the_same_command(tmp_path):
    missing = tmp_path / "missing"
    done = subprocess.run([sys.executable, "-m", "nrlprof", "summary", str(missing)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == f"nrlprof summary: {missing}: no such file or directory\n"


def test_shared_options_are_spelled_and_checked_alike_in_every_command():
    from nrlprof.tools.commands.options import OPTIONS, positive_int

    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    seen: dict[str, set[str]] = {name: set() for name in OPTIONS}
    for command, sub in subparsers.choices.items():
        for action in sub._actions:
            if action.dest in OPTIONS:
                flags, settings = OPTIONS[action.dest]
                assert tuple(action.option_strings) == flags, (command, action.option_strings)
                assert action.type is settings.get("type"), (command, action.dest)
                seen[action.dest].add(command)
    assert seen == {
        "json": {"summary", "explain", "merge", "diff", "collect", "doctor", "plan"},
        "output": {"merge", "report"},
        "address": {"capture", "collect", "doctor", "plan", "summary", "explain", "report", "merge"},
        "jobs": {"summary", "explain", "merge", "report"},
    }
    assert positive_int("3") == 3


@pytest.mark.parametrize("command", ["summary", "report", "merge"])
@pytest.mark.parametrize("jobs", ["0", "-2", "two"])
def test_jobs_must_be_a_positive_number(tmp_path, capsys, command, jobs):
    with pytest.raises(SystemExit) as exit:
        cli.main([command, str(tmp_path), "-j", jobs])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "argument -j/--jobs" in err and ("positive" in err or "whole number" in err)
