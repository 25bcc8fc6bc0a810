"""`nrlprof patch-ray`: the on-disk fix of Ray's nsight / rocprof-sys plugins, on a copy of the installed files."""

import asyncio
import errno
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import ray
from helpers.ray_patch import BUGGY_LINES, NSIGHT, ROCPROF, load_module, rewrite
from ray._private.runtime_env.context import RuntimeEnvContext
from ray.exceptions import RuntimeEnvSetupError
from ray.runtime_env import RuntimeEnv

from nrlprof.rayfix import patch_ray
from nrlprof.rayfix.fix import NRLPROF_FIX_VERSION as FIX

REPO = Path(__file__).resolve().parents[1]
PATCH_SCRIPT = REPO / "nrlprof" / "rayfix" / "patch_ray.py"
SHELL_SCRIPT = REPO / "scripts" / "patch_ray_nsight.sh"
RAY_RUNTIME_ENV = Path(ray.__file__).parent / "_private" / "runtime_env"
INTERPRETER = "/some/venv/bin/python"
UPSTREAM_FIXED_LINES = {
    NSIGHT: 'context.py_executable = shlex.join(self.nsight_cmd) + " " + context.py_executable',
    ROCPROF: 'context.py_executable = shlex.join(self.rocprof_sys_cmd) + " " + context.py_executable\n',
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def begin_markers(path: Path) -> int:
    return path.read_bytes().count(b"# >>> nrlprof ray-plugin-fix")


def run_patch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PATCH_SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def resources_dir(tmp_path: Path) -> str:
    return str(tmp_path / "session" / "runtime_resources")


# --- the patched plugins work ---------------------------------------------------------------------------------


def test_unpatched_copy_drops_the_interpreter(ray_dir: Path, tmp_path: Path) -> None:
    module = load_module(ray_dir / NSIGHT)
    context = RuntimeEnvContext(py_executable=INTERPRETER)
    module.NsightPlugin(resources_dir(tmp_path)).modify_context([], RuntimeEnv(_nsight="default"), context)
    assert context.py_executable.endswith(" python")


def test_patched_nsight_keeps_interpreter_and_quotes(ray_dir: Path, tmp_path: Path) -> None:
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    module = load_module(ray_dir / NSIGHT)
    assert module.NsightPlugin.nrlprof_fix_version == FIX
    plugin = module.NsightPlugin(resources_dir(tmp_path))
    context = RuntimeEnvContext(py_executable=INTERPRETER)
    runtime_env = RuntimeEnv(_nsight={"t": "cuda,nvtx", "o": "name with space;rm -rf x"})

    plugin.modify_context([], runtime_env, context)

    argv = shlex.split(context.py_executable)
    assert argv[:2] == ["nsys", "profile"]
    assert argv[-1] == INTERPRETER
    assert argv[argv.index("-t") + 1] == "cuda,nvtx"
    assert argv[argv.index("-o") + 1] == str(tmp_path / "session" / "logs" / "nsight" / "name with space;rm -rf x")


def test_patched_nsight_default_config(ray_dir: Path, tmp_path: Path) -> None:
    patch_ray.main(["--ray-dir", str(ray_dir)])
    module = load_module(ray_dir / NSIGHT)
    context = RuntimeEnvContext(py_executable=INTERPRETER)
    module.NsightPlugin(resources_dir(tmp_path)).modify_context([], RuntimeEnv(_nsight="default"), context)
    argv = shlex.split(context.py_executable)
    assert argv[argv.index("-o") + 1] == str(tmp_path / "session" / "logs" / "nsight" / "worker_process_%p")
    assert argv[-1] == INTERPRETER


def test_patched_nsight_create_dry_runs_nsys(ray_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_ray.main(["--ray-dir", str(ray_dir)])
    module = load_module(ray_dir / NSIGHT)
    plugin = module.NsightPlugin(resources_dir(tmp_path))
    runtime_env = RuntimeEnv(_nsight={"t": "cuda"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "nsys-calls"
    fake_nsys = bin_dir / "nsys"
    fake_nsys.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(calls))}\n')
    fake_nsys.chmod(0o755)

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeEnvSetupError, match="nsys is not installed"):
        asyncio.run(plugin.create(None, runtime_env, RuntimeEnvContext()))

    monkeypatch.setenv("PATH", str(bin_dir))
    assert asyncio.run(plugin.create(None, runtime_env, RuntimeEnvContext())) == 0
    assert calls.read_text().startswith("profile -t cuda -o ")


def test_patched_rocprof_keeps_interpreter_and_quotes(ray_dir: Path, tmp_path: Path) -> None:
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    module = load_module(ray_dir / ROCPROF)
    assert module.RocProfSysPlugin.nrlprof_fix_version == FIX
    plugin = module.RocProfSysPlugin(resources_dir(tmp_path))
    context = RuntimeEnvContext(py_executable=sys.executable)
    runtime_env = RuntimeEnv(
        _rocprof_sys={"args": {"F": "true", "setup": "my setup;rm -rf x"}, "env": {"ROCPROFSYS_OUTPUT_PREFIX": "w %p"}}
    )

    plugin.modify_context([], runtime_env, context)

    argv = shlex.split(context.py_executable)
    assert argv[0] == "rocprof-sys-python"
    assert "--" in argv
    assert "--setup=my setup;rm -rf x" in argv
    # rocprof-sys-python runs `$PYTHON_EXECUTABLE -m rocprofsys ... -- <script>`: the interpreter travels there.
    assert argv[-1] == "--"
    assert context.env_vars["PYTHON_EXECUTABLE"] == sys.executable
    assert context.env_vars["ROCPROFSYS_OUTPUT_PREFIX"] == "w %p"
    assert context.env_vars["ROCPROFSYS_OUTPUT_PATH"] == str(tmp_path / "session" / "logs" / "rocprof_sys")


# --- states, idempotence, versions ----------------------------------------------------------------------------


def test_inspect_ray_shape(ray_dir: Path) -> None:
    before = patch_ray.inspect_ray(ray_dir)
    assert before == {
        "nsight": {"relpath": NSIGHT, "path": str(ray_dir / NSIGHT), "state": "unpatched", "fix_version": None},
        "rocprof_sys": {"relpath": ROCPROF, "path": str(ray_dir / ROCPROF), "state": "unpatched", "fix_version": None},
    }
    patch_ray.main(["--ray-dir", str(ray_dir)])
    after = patch_ray.inspect_ray(str(ray_dir))
    assert {key: (value["state"], value["fix_version"]) for key, value in after.items()} == {
        "nsight": ("patched", FIX),
        "rocprof_sys": ("patched", FIX),
    }


def test_inspect_installed_ray_finds_it() -> None:
    states = patch_ray.inspect_ray()
    assert states["nsight"]["path"] == str(RAY_RUNTIME_ENV / "nsight.py")
    assert states["nsight"]["state"] in ("patched", "unpatched", "upstream-fixed")


def test_patch_is_idempotent(ray_dir: Path) -> None:
    assert run_patch("--ray-dir", str(ray_dir)).returncode == 0
    first = {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)}
    second = run_patch("--ray-dir", str(ray_dir))
    assert second.returncode == 0
    assert second.stdout.count("already patched") == 2
    assert {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)} == first
    assert begin_markers(ray_dir / NSIGHT) == begin_markers(ray_dir / ROCPROF) == 1


def test_patched_file_starts_with_the_original_bytes(ray_dir: Path) -> None:
    original = (ray_dir / NSIGHT).read_bytes()
    patch_ray.main(["--ray-dir", str(ray_dir)])
    patched = (ray_dir / NSIGHT).read_bytes()
    assert patched.startswith(original)
    assert patched.endswith(f"apply_nsight_fix(NsightPlugin)\n# <<< nrlprof ray-plugin-fix v{FIX} <<<\n".encode())


@pytest.mark.parametrize(("version", "source"), [(0, "OLD_FIX = 0\n"), (1, "STALE_FIX_OF_THE_SAME_VERSION = 1\n")])
def test_older_or_stale_fix_is_replaced(ray_dir: Path, version: int, source: str) -> None:
    path = ray_dir / NSIGHT
    original = path.read_bytes()
    plugin = patch_ray.PLUGINS[0]
    path.write_bytes(original + patch_ray.FixBlock(version, source).render(plugin))

    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0

    assert path.read_bytes() == original + patch_ray.load_fix_block().render(plugin)
    assert begin_markers(path) == 1


def test_newer_fix_is_left_alone(ray_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = ray_dir / NSIGHT
    path.write_bytes(path.read_bytes() + patch_ray.FixBlock(99, "NEWER_FIX = 99\n").render(patch_ray.PLUGINS[0]))
    before = sha256(path)
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    assert sha256(path) == before
    assert "newer fix (v99)" in capsys.readouterr().out


def test_check_exit_codes(ray_dir: Path) -> None:
    unfixed = run_patch("--check", "--ray-dir", str(ray_dir))
    assert unfixed.returncode == 1
    assert f"{NSIGHT}: unpatched" in unfixed.stdout and f"{ROCPROF}: unpatched" in unfixed.stdout
    untouched = {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)}
    assert begin_markers(ray_dir / NSIGHT) == 0

    run_patch("--ray-dir", str(ray_dir))
    fixed = run_patch("--check", "--ray-dir", str(ray_dir))
    assert fixed.returncode == 0
    assert f"{NSIGHT}: patched (fix v{FIX})" in fixed.stdout

    (ray_dir / ROCPROF).write_bytes(patch_ray.strip_blocks((ray_dir / ROCPROF).read_bytes()))
    assert sha256(ray_dir / ROCPROF) == untouched[ROCPROF]
    assert run_patch("--check", "--ray-dir", str(ray_dir)).returncode == 1


def test_check_and_revert_are_exclusive(ray_dir: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        patch_ray.main(["--check", "--revert", "--ray-dir", str(ray_dir)])
    assert exit_info.value.code == 2


# --- revert ---------------------------------------------------------------------------------------------------


def test_revert_restores_original_bytes_and_mode(ray_dir: Path) -> None:
    (ray_dir / NSIGHT).chmod(0o640)
    originals = {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)}
    assert run_patch("--ray-dir", str(ray_dir)).returncode == 0
    assert sha256(ray_dir / NSIGHT) != originals[NSIGHT]
    assert (ray_dir / NSIGHT).stat().st_mode & 0o777 == 0o640

    reverted = run_patch("--revert", "--ray-dir", str(ray_dir))

    assert reverted.returncode == 0
    assert {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)} == originals
    assert (ray_dir / NSIGHT).stat().st_mode & 0o777 == 0o640
    again = run_patch("--revert", "--ray-dir", str(ray_dir))
    assert again.returncode == 0 and "nothing to revert" in again.stdout
    assert {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)} == originals


def test_revert_file_without_final_newline(ray_dir: Path) -> None:
    path = ray_dir / NSIGHT
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    original = sha256(path)
    patch_ray.main(["--ray-dir", str(ray_dir)])
    compile(path.read_bytes(), str(path), "exec")
    patch_ray.main(["--revert", "--ray-dir", str(ray_dir)])
    assert sha256(path) == original


# --- upstream-fixed, unrecognised, missing --------------------------------------------------------------------


def test_upstream_fixed_file_is_left_alone(ray_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for relpath in (NSIGHT, ROCPROF):
        rewrite(ray_dir / relpath, BUGGY_LINES[relpath], UPSTREAM_FIXED_LINES[relpath])
    before = {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)}
    assert {state["state"] for state in patch_ray.inspect_ray(ray_dir).values()} == {"upstream-fixed"}

    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    assert capsys.readouterr().out.count("upstream-fixed") == 2
    assert {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)} == before
    assert patch_ray.main(["--check", "--ray-dir", str(ray_dir)]) == 0
    assert patch_ray.main(["--revert", "--ray-dir", str(ray_dir)]) == 0
    assert {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)} == before


def test_unrecognised_plugin_is_not_patched(ray_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rewrite(ray_dir / NSIGHT, "class NsightPlugin(", "class NsightProfilerPlugin(")
    before = sha256(ray_dir / NSIGHT)
    assert patch_ray.inspect_ray(ray_dir)["nsight"]["state"] == "unrecognised"
    assert patch_ray.main(["--check", "--ray-dir", str(ray_dir)]) == 1
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 2
    assert "no class NsightPlugin" in capsys.readouterr().err
    assert sha256(ray_dir / NSIGHT) == before


def test_missing_rocprof_plugin_is_not_an_error(ray_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ray_dir / ROCPROF).unlink()
    assert patch_ray.inspect_ray(ray_dir)["rocprof_sys"]["state"] == "missing"
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    assert f"{ROCPROF}: missing" in capsys.readouterr().out
    assert patch_ray.main(["--check", "--ray-dir", str(ray_dir)]) == 0


def test_no_ray_is_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert patch_ray.main(["--ray-dir", str(tmp_path / "nowhere")]) == 2
    assert "no Ray runtime-env plugins under" in capsys.readouterr().err
    monkeypatch.setattr(patch_ray.importlib.util, "find_spec", lambda name: None)
    assert patch_ray.main([]) == 2
    assert "no importable `ray` package" in capsys.readouterr().err
    assert patch_ray.inspect_ray()["nsight"] == {
        "relpath": NSIGHT,
        "path": None,
        "state": "missing",
        "fix_version": None,
    }


# --- failures leave the original ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("os.replace", PermissionError(errno.EACCES, "Permission denied")),
        ("os.replace", OSError(errno.EROFS, "Read-only file system")),
        ("tempfile.mkstemp", PermissionError(errno.EACCES, "Permission denied")),
    ],
)
def test_read_only_install_is_one_clear_message(
    ray_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], target: str, error: OSError
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise error

    module_name, function = target.split(".")
    monkeypatch.setattr(getattr(patch_ray, module_name), function, refuse)
    before = sorted(path.name for path in (ray_dir / NSIGHT).parent.iterdir())
    original = sha256(ray_dir / NSIGHT)

    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 2

    err = capsys.readouterr().err
    assert err.count("nrlprof patch-ray:") == 1
    assert str(ray_dir / NSIGHT) in err and error.strerror in err
    assert 'RAY_RUNTIME_ENV_PLUGINS=\'[{"class": "nrlprof.rayfix.agent_hook.AgentHook"}]\'' in err
    assert sha256(ray_dir / NSIGHT) == original
    assert sorted(path.name for path in (ray_dir / NSIGHT).parent.iterdir()) == before


def test_fix_that_does_not_compile_leaves_original(
    ray_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Parses on its own, but a __future__ import cannot follow Ray's code.
    bad_fix = tmp_path / "bad_fix.py"
    # source as data: the fix module patch_ray would splice into Ray's
    bad_fix.write_text("from __future__ import annotations\n\nNRLPROF_FIX_VERSION = 1\n")
    monkeypatch.setattr(patch_ray, "FIX_SOURCE", bad_fix)
    original = sha256(ray_dir / NSIGHT)
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 2
    assert "would not compile once patched" in capsys.readouterr().err
    assert sha256(ray_dir / NSIGHT) == original


def test_fix_that_rebinds_a_ray_name_is_refused(
    ray_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clashing_fix = tmp_path / "clashing_fix.py"
    # source as data: the fix module patch_ray would splice into Ray's
    clashing_fix.write_text("NRLPROF_FIX_VERSION = 1\n\n\ndef parse_nsight_config(config):\n    return []\n")
    monkeypatch.setattr(patch_ray, "FIX_SOURCE", clashing_fix)
    original = sha256(ray_dir / NSIGHT)
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 2
    assert "would rebind parse_nsight_config" in capsys.readouterr().err
    assert sha256(ray_dir / NSIGHT) == original


# --- concurrency ----------------------------------------------------------------------------------------------


def test_eight_concurrent_patchers_leave_one_valid_block(ray_dir: Path) -> None:
    originals = {relpath: (ray_dir / relpath).read_bytes() for relpath in (NSIGHT, ROCPROF)}
    command = [sys.executable, str(PATCH_SCRIPT), "--ray-dir", str(ray_dir)]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    results = [process.communicate(timeout=60) for process in processes]

    assert [process.returncode for process in processes] == [0] * 8, results
    block = patch_ray.load_fix_block()
    for plugin in patch_ray.PLUGINS:
        path = ray_dir / plugin.relpath
        assert begin_markers(path) == 1
        assert path.read_bytes() == originals[plugin.relpath] + block.render(plugin)
        compile(path.read_bytes(), str(path), "exec")
    assert sorted(path.name for path in (ray_dir / NSIGHT).parent.iterdir()) == ["nsight.py", "rocprof_sys.py"]


# --- standalone runs and the SLURM script ---------------------------------------------------------------------


def test_runs_by_path_and_as_module(ray_dir: Path, tmp_path: Path) -> None:
    by_path = run_patch("--check", "--ray-dir", str(ray_dir), cwd=tmp_path)
    assert by_path.returncode == 1, by_path.stderr
    as_module = subprocess.run(
        [sys.executable, "-m", "nrlprof.rayfix.patch_ray", "--ray-dir", str(ray_dir)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert as_module.returncode == 0, as_module.stderr
    assert begin_markers(ray_dir / NSIGHT) == 1


def test_shell_script_with_the_venv_interpreter(ray_dir: Path, tmp_path: Path) -> None:
    originals = {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)}

    def script(*args: str) -> subprocess.CompletedProcess[str]:
        command = ["bash", str(SHELL_SCRIPT), sys.executable, *args, "--ray-dir", str(ray_dir)]
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=60)

    assert script("--check").returncode == 1
    assert script().returncode == 0
    assert script().returncode == 0
    assert begin_markers(ray_dir / NSIGHT) == begin_markers(ray_dir / ROCPROF) == 1
    assert script("--check").returncode == 0
    assert script("--revert").returncode == 0
    assert {relpath: sha256(ray_dir / relpath) for relpath in (NSIGHT, ROCPROF)} == originals


def _python_without_nrlprof(cwd: Path) -> str | None:
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate is None or Path(candidate).resolve() == Path(sys.executable).resolve():
            continue
        probe = subprocess.run(
            [candidate, "-c", "import nrlprof"], capture_output=True, cwd=cwd, env=_env_without_pythonpath()
        )
        if probe.returncode != 0:
            return candidate
    return None


def _env_without_pythonpath() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def test_shell_script_with_an_interpreter_without_nrlprof(ray_dir: Path, tmp_path: Path) -> None:
    python = _python_without_nrlprof(tmp_path)
    if python is None:
        pytest.skip("no Python without nrlprof on this machine")

    def script(*args: str) -> subprocess.CompletedProcess[str]:
        command = ["bash", str(SHELL_SCRIPT), python, *args, "--ray-dir", str(ray_dir)]
        return subprocess.run(
            command, capture_output=True, text=True, cwd=tmp_path, env=_env_without_pythonpath(), timeout=60
        )

    original = sha256(ray_dir / NSIGHT)
    patched = script()
    assert patched.returncode == 0, patched.stderr
    assert begin_markers(ray_dir / NSIGHT) == 1
    assert script("--check").returncode == 0
    assert script("--revert").returncode == 0
    assert sha256(ray_dir / NSIGHT) == original


def test_shell_script_without_ray_exits_2(tmp_path: Path) -> None:
    python = _python_without_nrlprof(tmp_path)
    if python is None:
        pytest.skip("no Python without nrlprof on this machine")
    probe = subprocess.run([python, "-c", "import ray"], capture_output=True, cwd=tmp_path)
    if probe.returncode == 0:
        pytest.skip(f"{python} has Ray")
    result = subprocess.run(["bash", str(SHELL_SCRIPT), python], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert "no importable `ray` package" in result.stderr


def test_shell_script_with_no_such_interpreter(tmp_path: Path) -> None:
    result = subprocess.run(["bash", str(SHELL_SCRIPT), str(tmp_path / "python")], capture_output=True, text=True)
    assert result.returncode == 2
    assert "no Python interpreter" in result.stderr


def test_nrlprof_command_takes_every_patch_ray_option(ray_dir: Path) -> None:
    """The README's `nrlprof patch-ray --check|--revert --ray-dir DIR`, through the installed command."""
    nrlprof_cli = str(Path(sys.executable).with_name("nrlprof"))
    original = sha256(ray_dir / NSIGHT)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([nrlprof_cli, "patch-ray", *args], capture_output=True, text=True, timeout=60)

    unfixed = cli("--check", "--ray-dir", str(ray_dir))
    assert unfixed.returncode == 1, unfixed.stderr
    assert f"{NSIGHT}: unpatched" in unfixed.stdout
    assert cli("--ray-dir", str(ray_dir)).returncode == 0
    assert begin_markers(ray_dir / NSIGHT) == 1
    assert cli("--check", "--ray-dir", str(ray_dir)).returncode == 0
    reverted = cli("--revert", "--ray-dir", str(ray_dir))
    assert reverted.returncode == 0, reverted.stderr
    assert sha256(ray_dir / NSIGHT) == original
    assert cli("--check", "--revert", "--ray-dir", str(ray_dir)).returncode == 2
