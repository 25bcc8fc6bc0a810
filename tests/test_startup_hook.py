"""Activation at interpreter start-up (nrlprof-startup.pth): no `import nrlprof` in the program.

These run fresh interpreters of the test environment, where nrlprof is installed (editable) with its start-up
hook, plus one fresh venv with nrlprof installed from its wheel.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers.environment import environment_without

REPO = Path(__file__).resolve().parents[1]
PROBES = REPO / "tests" / "programs" / "startup_probes.py"
GOOD = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4"}


def clean_env(**variables: str) -> dict[str, str]:
    env = environment_without("NRL_", "NRLPROF_")
    return {**env, **variables}


def run(probe: str, env: dict[str, str], python: str = sys.executable, cwd: Path | None = None):
    """tests/programs/startup_probes.py's `probe`, in a fresh interpreter."""
    return subprocess.run([python, str(PROBES), probe], env=env, capture_output=True, text=True, timeout=300,
                          cwd=cwd)  # fmt: skip


def test_the_hook_is_installed_beside_the_package():
    site = Path(sysconfig.get_paths()["purelib"])
    line = (site / "nrlprof-startup.pth").read_text().strip()
    assert line.startswith("import os;"), "a .pth line runs only when it starts with `import`"
    assert (site / "nrlprof_startup.py").is_file()


def test_with_no_nrl_variable_nothing_is_imported_and_nothing_printed():
    result = run("imported", clean_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert result.stderr == ""


def test_only_a_variable_named_nrl_something_wakes_the_hook():
    """The hook looks at the names alone: `NRL_` inside a value or a longer name is not a setting."""
    for env in (
        clean_env(JOB_NOTE="NRL_NSYS_WORKER_PATTERNS=*", XNRL_NSYS_RANKS="0"),
        clean_env(NRL_PROFILE_DISABLE="1"),
    ):
        result = run("hook_woken", env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str("NRL_PROFILE_DISABLE" in env)


def test_a_program_that_never_imports_nrlprof_is_active_before_its_own_code():
    result = run("active_before_own_code", clean_env(**GOOD))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "False"], "active, with neither ray nor torch imported"
    assert result.stderr == "", "nothing is logged before the program imports ray"


def test_a_bad_setting_stops_the_program_before_its_own_code_with_one_line():
    result = run("ran", clean_env(NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="0:10"))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nrlprof.ConfigError: NRL_TORCH_PROFILE_STEP_RANGE='0:10' is invalid")


def test_nrl_profile_disable_turns_the_hook_off():
    result = run("active", clean_env(NRL_PROFILE_DISABLE="1", NRL_TORCH_PROFILE_STEP_RANGE="0:10"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_later_import_and_configure_keep_the_session_the_hook_made(tmp_path):
    result = run(
        "configured_later",
        clean_env(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(tmp_path / "anatomy")),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "['torch']"]


def test_a_drivers_children_may_be_drivers_and_a_ray_workers_children_are_not(tmp_path):
    """A launcher or sweep script starts drivers; a Ray worker's DataLoader or engine process is no driver."""
    result = run(
        "children",
        clean_env(**GOOD, NRL_STEP_ANATOMY="0"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "driver's: child True" in result.stdout
    assert "ray worker's: child False" in result.stdout


@pytest.mark.build
def test_a_wheel_install_activates_at_start_up(tmp_path):
    """`pip install nrlprof` (not editable) in a fresh venv: the wheel carries the hook to site-packages."""
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("nrlprof-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    result = run("active_from", clean_env(**GOOD, NRL_STEP_ANATOMY="0"), python=python, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    active, where = result.stdout.split()
    assert active == "True"
    assert where.startswith(str(venv)), "the installed copy, not the checkout"
    bad = run("ran", clean_env(NRL_TORCH_PROFILE_STEP_RANGE="5:5", NRL_TORCH_PROFILE_WORKER_PATTERNS="x"),
              python=python, cwd=tmp_path)  # fmt: skip
    assert bad.returncode == 2 and "NRL_TORCH_PROFILE_STEP_RANGE='5:5'" in bad.stderr
    uninstall = subprocess.run([python, "-m", "pip", "uninstall", "-y", "-q", "nrlprof"], capture_output=True,
                               timeout=300)  # fmt: skip
    assert uninstall.returncode == 0
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())  # fmt: skip
    assert not (site / "nrlprof-startup.pth").exists(), "uninstalling removes the hook"


@pytest.mark.build
@pytest.mark.parametrize("editable", [False, True], ids=["uv-build", "uv-editable"])
def test_uv_installs_the_hook_too(tmp_path, editable):
    """uv builds nrlprof with its own build isolation (what `uv add` does) and installs the hook with it."""
    uv = str(Path(sys.executable).with_name("uv"))
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    source = ["-e", str(REPO)] if editable else [str(REPO)]
    install = subprocess.run([uv, "pip", "install", "-q", "--python", python, "--no-deps", *source],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert install.returncode == 0, install.stderr
    result = run("active", clean_env(**GOOD, NRL_STEP_ANATOMY="0"), python=python, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
