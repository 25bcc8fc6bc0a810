"""One source for the hook's class path and the fixed states; the in-memory fix goes through the patch registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.environment import environment_without

from nrlprof.errors import NrlprofError
from nrlprof.rayfix import names, patch_ray, plugins_env

REPO = Path(__file__).resolve().parents[1]
PATCH_SCRIPT = REPO / "nrlprof" / "rayfix" / "patch_ray.py"
PROBES = REPO / "tests" / "programs" / "rayfix_names_probes.py"


def run_python(cwd: Path, probe: str, *args: str) -> dict:
    """tests/programs/rayfix_names_probes.py's `probe`, in a fresh interpreter with no PYTHONPATH."""
    env = environment_without("NRL_", "NRLPROF_", "PYTHONPATH")
    result = subprocess.run([sys.executable, str(PROBES), probe, *args], capture_output=True, text=True, cwd=cwd,
                            env=env, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_hook_class_path_names_the_hook_class(tmp_path: Path) -> None:
    found = run_python(tmp_path, "hook_class")
    assert found == names.HOOK_CLASS_PATH == "nrlprof.rayfix.agent_hook.AgentHook"


def test_patch_ray_run_by_path_reads_the_same_names(tmp_path: Path) -> None:
    by_path = run_python(tmp_path, "patch_ray_by_path", str(PATCH_SCRIPT))
    assert by_path["hook"] == names.HOOK_CLASS_PATH
    assert by_path["setting"] == names.HOOK_SETTING
    assert tuple(by_path["fixed"]) == names.FIXED_STATES == ("patched", "upstream-fixed")
    assert by_path["error_bases"] == ["PatchError", "Exception", "BaseException", "object"]


def test_imported_patch_ray_shares_the_package_names() -> None:
    assert patch_ray.HOOK_CLASS_PATH is names.HOOK_CLASS_PATH
    assert patch_ray.FIXED_STATES is names.FIXED_STATES
    assert plugins_env.HOOK_CLASS_PATH is names.HOOK_CLASS_PATH
    assert issubclass(patch_ray.PatchError, NrlprofError)
    assert names.HOOK_SETTING == 'RAY_RUNTIME_ENV_PLUGINS=\'[{"class": "nrlprof.rayfix.agent_hook.AgentHook"}]\''
    assert json.loads(plugins_env.with_agent_hook(None)) == [{"class": names.HOOK_CLASS_PATH}]


def test_readme_and_doctor_name_the_same_hook() -> None:
    from nrlprof.tools.check import doctor

    assert names.HOOK_SETTING in (REPO / "README.md").read_text()
    assert getattr(doctor, "HOOK_SETTING", names.HOOK_SETTING) == names.HOOK_SETTING
    assert tuple(getattr(doctor, "FIXED_STATES", names.FIXED_STATES)) == names.FIXED_STATES


def test_agent_hook_installs_named_reversible_patches(tmp_path: Path) -> None:
    result = run_python(tmp_path, "agent_hook_patches")
    expected = sorted(
        f"ray.{cls}.{method}" for cls in ("NsightPlugin", "RocProfSysPlugin") for method in ("create", "modify_context")
    )
    assert result == {"fixed": True, "installed": expected, "names": expected, "restored": True}
