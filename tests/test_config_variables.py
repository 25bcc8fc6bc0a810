"""The cheap "is anything configured?" test and the variable names it holds; a misspelled NRL_* variable is named
with the one meant, and a framework's own NRL_* variables get no warning."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.environment import environment_without

import nrlprof.config.variables as variables
from nrlprof import ConfigError
from nrlprof.config.env import load_plan
from nrlprof.config.misspelled import misspelled_variables
from nrlprof.config.variables import SELECTING_VARIABLES, is_configured, may_activate


@pytest.mark.parametrize("name", SELECTING_VARIABLES)
def test_each_selecting_variable_configures(name):
    assert is_configured({name: "x"})
    assert may_activate({name: "x"})


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"NRL_NSYS_WORKER_PATTERNS": "  "},
        {"NRL_PROFILE_CONFIG": ""},
        {"NRL_PROFILE_LOG_LEVEL": "DEBUG", "NRL_PROFILE_TIMEOUT_S": "5", "NRL_NSYS_RANKS": "0"},
        {"NRL_TORCH_PROFILE_DIR": "/tmp/t", "NRL_NSYS_EXTRA_OPTIONS": "{}"},
        {"NRL_MEMORY_PROFILE_MAX_ENTRIES": "1000", "NRL_MEMORY_PROFILE_DIR": "/tmp/m"},
        {"NRLPROF_WORKER": ""},
    ],
)
def test_settings_alone_and_blank_values_configure_nothing(environ):
    assert not is_configured(environ)
    assert not may_activate(environ)


def test_a_profiled_worker_may_activate_without_selecting_variables():
    assert may_activate({"NRLPROF_WORKER": '{"name": "w"}'})
    assert not is_configured({"NRLPROF_WORKER": '{"name": "w"}'})


def test_the_names_are_the_documented_ones():
    assert set(SELECTING_VARIABLES) == {
        "NRL_NSYS_WORKER_PATTERNS",
        "NRL_NSYS_PROFILE_STEP_RANGE",
        "NRL_TORCH_PROFILE_WORKER_PATTERNS",
        "NRL_TORCH_PROFILE_STEP_RANGE",
        "NRL_ROCPROF_WORKER_PATTERNS",
        "NRL_ROCPROF_PROFILE_STEP_RANGE",
        "NRL_MEMORY_PROFILE_WORKER_PATTERNS",
        "NRL_MEMORY_PROFILE_STEP_RANGE",
        "NRL_PROFILE_CONFIG",
    }
    assert variables.CONFIG_FILE_VARIABLE == "NRL_PROFILE_CONFIG"
    assert variables.TIMEOUT_VARIABLE == "NRL_PROFILE_TIMEOUT_S"


def test_the_module_imports_nothing_costly():
    tree = ast.parse(Path(variables.__file__).read_text())
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= {"__future__", "collections.abc"}


def test_config_modules_take_the_file_variable_from_one_place():
    config_dir = Path(variables.__file__).parent
    defining = [p.name for p in config_dir.glob("*.py") if 'CONFIG_FILE_VARIABLE = "' in p.read_text()]
    assert defining == ["variables.py"]


@pytest.mark.parametrize(("value", "activates"), [("1", True), ("on", True), ("0", False), ("", False)])
def test_step_anatomy_alone_may_activate_a_driver(value, activates):
    assert may_activate({"NRL_STEP_ANATOMY": value}) is activates
    assert not is_configured({"NRL_STEP_ANATOMY": value}), "it selects no worker for a profiler"


def clean_env(**variables: str) -> dict[str, str]:
    return {**environment_without("NRL_", "NRLPROF_"), **variables}


def driver(**variables: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "print('ran')"], env=clean_env(**variables), capture_output=True,
                          text=True, timeout=300)  # fmt: skip


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
