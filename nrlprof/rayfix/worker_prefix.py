"""A `py_executable` that starts the worker under nsys / rocprof-sys itself, for agents without nrlprof's fix.

Ray runs a worker as `bash -c "exec <py_executable> <default_worker.py> <args>"`; its arguments carry the node's
`--temp-dir=` and `--session-name=`, so a small bash script in `py_executable` finds the node's session directory
(`<temp dir>/<session name>`) and writes reports to `<session dir>/logs/nsight/` as the plugin does. With no
interpreter of the user's, it runs the node's default one: the first word of the raylet's `--python_worker_command`
(what Ray's agent uses too). A missing tool or session directory starts the worker unprofiled, with a warning on its
stderr (which is the raylet's, `logs/raylet.err`): profiling is never the reason a worker does not start.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from nrlprof.layout import LOGS_DIR, NSIGHT_DIR, ROCPROF_DIR
from nrlprof.rayfix.fix import NSIGHT_DEFAULTS, ROCPROF_DEFAULTS, render_tool_options, rocprof_command

SCRIPT_NAME = "nrlprof-worker"
SESSION_FROM_ARGUMENTS = """\
temp=; session=
for arg do
  case $arg in
    --temp-dir=*) temp=${arg#--temp-dir=} ;;
    --session-name=*) session=${arg#--session-name=} ;;
  esac
done
logs="$temp/$session/LOGS_DIR"
why=
[ -n "$temp" ] && [ -n "$session" ] || why="no --temp-dir/--session-name in the worker's arguments"
""".replace("LOGS_DIR", LOGS_DIR)
INTERPRETER_FROM_RAYLET = """\
py=
if [ -r "/proc/${RAY_RAYLET_PID:-0}/cmdline" ]; then
  while IFS= read -r -d '' arg; do
    case $arg in --python_worker_command=*) py=${arg#--python_worker_command=}; py=${py%% *}; break ;; esac
  done < "/proc/$RAY_RAYLET_PID/cmdline"
fi
if [ -z "$py" ]; then
  echo "[nrlprof] WARNING: the raylet's Python is unknown (RAY_RAYLET_PID=${RAY_RAYLET_PID:-}); using python3" >&2
  py=python3
fi
"""
NODE_INTERPRETER = '"$py"'


def nsight_settings(config: object) -> tuple[dict, list[str]]:
    """(nsys options, flags) of a runtime_env `_nsight` value: "default" or a dict with optional `flags`."""
    if config == "default":
        config = NSIGHT_DEFAULTS
    if not isinstance(config, Mapping):
        raise ValueError(f"_nsight={config!r} is not 'default' or a dict of nsys options")
    options = {k: v for k, v in config.items() if k != "flags"}
    return options, [str(flag) for flag in config.get("flags") or []]


def rocprof_settings(config: object) -> tuple[dict, dict]:
    """(rocprof-sys-python options, environment) of a runtime_env `_rocprof_sys` value."""
    if config == "default":
        config = ROCPROF_DEFAULTS
    if not isinstance(config, Mapping):
        raise ValueError(f"_rocprof_sys={config!r} is not 'default' or a dict with 'args' and 'env'")
    return dict(config.get("args") or {}), {str(k): str(v) for k, v in (config.get("env") or {}).items()}


def _output_name(value: object) -> str:
    """The `-o` name without the shell quotes users of Ray's unquoting plugin had to add."""
    name = str(value)
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "'\"":
        return name[1:-1]
    return name


def worker_prefix(nsight: object = None, rocprof: object = None, interpreter: str | None = None) -> str:
    """The `py_executable` value: nsys (and/or rocprof-sys) around `interpreter` (a shell fragment, as Ray takes it).

    `interpreter` None runs the node's default Python. Raises ValueError for a malformed `_nsight` / `_rocprof_sys`.
    """
    base = interpreter if interpreter else NODE_INTERPRETER
    lines = [SESSION_FROM_ARGUMENTS]
    if not interpreter:
        lines.append(INTERPRETER_FROM_RAYLET)
    launch, tools, directories, exports = base, [], [], []
    if rocprof is not None:
        args, env = rocprof_settings(rocprof)
        exports += [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
        if "ROCPROFSYS_OUTPUT_PATH" not in env:
            exports.append(f'export ROCPROFSYS_OUTPUT_PATH="$logs/{ROCPROF_DIR}"')
            directories.append(f'"$logs/{ROCPROF_DIR}"')
        # rocprof-sys-python runs `$PYTHON_EXECUTABLE -m rocprofsys ... -- <script>`: the interpreter travels there.
        words = shlex.split(base) if interpreter else []
        if not interpreter or len(words) == 1:
            exports.append(f"export PYTHON_EXECUTABLE={base if not interpreter else shlex.quote(words[0])}")
        launch, tools = shlex.join(rocprof_command(args)), ["rocprof-sys-python"]
    if nsight is not None:
        options, flags = nsight_settings(nsight)
        flag_words = "".join(" " + shlex.quote(f"--{flag}") for flag in flags)
        if "session-new" in options:  # armed for windows asked for: collections start in its session later
            launch = f"{shlex.join(['nsys', 'launch', *render_tool_options(options)])}{flag_words} {launch}"
        else:
            name = _output_name(options.pop("o", NSIGHT_DEFAULTS["o"]))
            in_session = not name.startswith("/")
            output = f'"$logs/{NSIGHT_DIR}"/{shlex.quote(name)}' if in_session else shlex.quote(name)
            launch = (
                f"{shlex.join(['nsys', 'profile', *render_tool_options(options)])} -o {output}{flag_words} {launch}"
            )
            if in_session:
                directories.append(f'"$logs/{NSIGHT_DIR}"')
        tools.insert(0, "nsys")
    for tool in tools:
        lines.append(f'[ -n "$why" ] || command -v {tool} >/dev/null 2>&1 || why="{tool} is not on PATH"\n')
    for directory in directories:
        lines.append(f'[ -n "$why" ] || mkdir -p {directory} || why="cannot create "{directory}\n')
    lines.append('if [ -z "$why" ]; then\n')
    lines += [f"  {line}\n" for line in exports]
    lines.append(f'  exec {launch} "$@"\nfi\n')
    lines.append('echo "[nrlprof] WARNING: worker pid $$ runs without profiling: $why" >&2\n')
    lines.append(f'exec {base} "$@"\n')
    return f"bash -c {shlex.quote(''.join(lines))} {SCRIPT_NAME}"
