"""Fixed command construction for Ray's nsight and rocprof-sys runtime-env plugins.

Ray's plugins build the worker command as `" ".join(self.nsight_cmd) + " python"`:
the interpreter chosen by earlier plugins (venv, uv, `py_executable`) is dropped,
values are not shell-quoted, and the command is per-plugin state shared by
concurrent actor creations.  The functions here derive the command from each
runtime env, quote every argument and keep `context.py_executable`.

This module needs only the standard library and Ray: `nrlprof patch-ray` appends
its source to Ray's plugin files (which then call `apply_*_fix`), and the
runtime-env agent hook installs `FIXED_METHODS` in memory through nrlprof's
patch registry.  Keep it self-contained.
"""

import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

NRLPROF_FIX_VERSION = 2
NSIGHT_DEFAULTS = {"t": "cuda,cudnn,cublas,nvtx", "o": "worker_process_%p", "stop-on-exit": "true"}
ROCPROF_DEFAULTS = {
    "env": {"ROCPROFSYS_TIME_OUTPUT": "false", "ROCPROFSYS_OUTPUT_PREFIX": "worker_process_%p"},
    "args": {"F": "true"},
}


def render_tool_options(options):
    """`{"t": "cuda", "capture-range": "x"}` -> `["-t", "cuda", "--capture-range=x"]`."""
    argv = []
    for key, value in options.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        if len(key) > 1:
            argv.append(f"--{key}={value}")
        else:
            argv += [f"-{key}", str(value)]
    return argv


def _strip_shell_quotes(value):
    text = str(value)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _quote_interpreter(py_executable):
    # Earlier plugins may hand over a shell fragment ("uv run ..."): keep it as is.
    return shlex.quote(py_executable) if os.path.exists(py_executable) else py_executable


def nsight_config_of(runtime_env):
    config = runtime_env.nsight()
    if isinstance(config, str):
        if config != "default":
            raise ValueError(f"Unsupported nsight config {config!r}: use 'default' or a dict of nsys options")
        config = NSIGHT_DEFAULTS
    return {k: v for k, v in dict(config).items() if k not in ("flags",)}, list(dict(config).get("flags", []) or [])


def nsight_command(config, flags, nsight_dir, output=None):
    options = dict(config)
    if "session-new" in options:
        # Armed for windows asked for: a session of its own, collecting nothing until `nsys start` in it.
        return ["nsys", "launch", *render_tool_options(options), *[f"--{f}" for f in flags]]
    name = _strip_shell_quotes(options.pop("o", NSIGHT_DEFAULTS["o"]))
    options["o"] = output if output is not None else str(Path(nsight_dir) / name)
    return ["nsys", "profile", *render_tool_options(options), *[f"--{f}" for f in flags]]


async def _dry_run(argv, tool, env=None, cleanup=None):
    """Run the profiler once on an empty program; a missing tool or a failed run is a RuntimeEnvSetupError."""
    from ray.exceptions import RuntimeEnvSetupError

    try:
        process = await asyncio.create_subprocess_exec(*argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = await process.communicate()
    except FileNotFoundError:
        raise RuntimeEnvSetupError(
            f"{tool} is not installed on this node (not found on the runtime-env agent's PATH)"
        ) from None
    finally:
        if cleanup is not None:
            cleanup()
    if process.returncode != 0:
        message = (stderr or stdout).decode(errors="replace").strip()
        raise RuntimeEnvSetupError(f"{tool} failed its dry run ({shlex.join(argv)}):\n{message}")
    return 0


def _setup_error(err):
    from ray.exceptions import RuntimeEnvSetupError

    return RuntimeEnvSetupError(str(err))


async def fixed_nsight_create(self, uri, runtime_env, context, logger=None):
    if not runtime_env.nsight():
        return 0
    try:
        config, flags = nsight_config_of(runtime_env)
    except ValueError as err:
        raise _setup_error(err) from None
    nsight_dir = Path(self._nsight_dir)
    nsight_dir.mkdir(parents=True, exist_ok=True)
    probe = f"nrlprof-dryrun-{os.getpid()}-{id(runtime_env):x}-{os.urandom(4).hex()}"
    if "session-new" in config:
        config = {**config, "session-new": probe}
    argv = nsight_command(config, flags, nsight_dir, output=str(nsight_dir / probe))

    def remove_probe_reports():
        for leftover in nsight_dir.glob(probe + "*"):
            leftover.unlink(missing_ok=True)

    return await _dry_run([*argv, sys.executable, "-c", ""], "nsys", cleanup=remove_probe_reports)


def fixed_nsight_modify_context(self, uris, runtime_env, context, logger=None):
    config, flags = nsight_config_of(runtime_env)
    argv = nsight_command(config, flags, self._nsight_dir)
    context.py_executable = shlex.join(argv) + " " + _quote_interpreter(context.py_executable)
    if logger is not None:
        logger.info("Running nsight profiler: %s", context.py_executable)


def rocprof_config_of(runtime_env):
    config = runtime_env.rocprof_sys()
    if isinstance(config, str):
        if config != "default":
            raise ValueError(f"Unsupported rocprof_sys config {config!r}: use 'default' or a dict")
        config = ROCPROF_DEFAULTS
    return dict(config.get("args", {}) or {}), dict(config.get("env", {}) or {})


def rocprof_command(args):
    return ["rocprof-sys-python", *render_tool_options(args), "--"]


async def fixed_rocprof_create(self, uri, runtime_env, context, logger=None):
    if not runtime_env.rocprof_sys():
        return 0
    try:
        args, _ = rocprof_config_of(runtime_env)
    except ValueError as err:
        raise _setup_error(err) from None
    with tempfile.TemporaryDirectory(prefix="nrlprof-dryrun-") as scratch:
        script = Path(scratch) / "probe.py"
        script.write_text("pass\n")
        env = {**os.environ, "ROCPROFSYS_OUTPUT_PATH": scratch}
        return await _dry_run([*rocprof_command(args), str(script)], "rocprof-sys-python", env=env)


def fixed_rocprof_modify_context(self, uris, runtime_env, context, logger=None):
    # rocprof-sys-python runs `$PYTHON_EXECUTABLE -m rocprofsys <args> -- <script>`: the first word
    # after `--` is a script, so the interpreter earlier plugins chose travels as PYTHON_EXECUTABLE.
    args, env = rocprof_config_of(runtime_env)
    env.setdefault("ROCPROFSYS_OUTPUT_PATH", str(self._rocprof_sys_dir))
    if os.path.exists(context.py_executable):
        env.setdefault("PYTHON_EXECUTABLE", context.py_executable)
    elif logger is not None:
        logger.warning("rocprof-sys cannot wrap %r; rocprof-sys-python uses its own interpreter", context.py_executable)
    context.py_executable = shlex.join(rocprof_command(args))
    context.env_vars.update({k: str(v) for k, v in env.items()})
    if logger is not None:
        logger.info("Running rocprof-sys profiler: %s", context.py_executable)


# The fixed methods of each plugin class, by class name.
FIXED_METHODS = {
    "NsightPlugin": {"create": fixed_nsight_create, "modify_context": fixed_nsight_modify_context},
    "RocProfSysPlugin": {"create": fixed_rocprof_create, "modify_context": fixed_rocprof_modify_context},
}


def _apply(cls):
    """Set the fixed methods on the plugin class (the on-disk route, at the end of Ray's own module)."""
    for name, replacement in FIXED_METHODS[cls.__name__].items():
        setattr(cls, name, replacement)
    cls.nrlprof_fix_version = NRLPROF_FIX_VERSION


def apply_nsight_fix(cls):
    _apply(cls)


def apply_rocprof_fix(cls):
    _apply(cls)
