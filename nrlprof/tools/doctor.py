"""`nrlprof doctor`: check every node of a running Ray cluster for what profiled workers need.

Per node (one task pinned to it): `nsys` and `rocprof-sys-python` on the PATH the Ray processes have, with
their versions; a visible NVIDIA GPU; Ray's profiler-plugin fix, in memory (the node's runtime-env agent was
started with `RAY_RUNTIME_ENV_PLUGINS` listing nrlprof's hook) or on disk (`nrlprof patch-ray`); whether the
torch output directory is writable there; and whether its Python matches the driver's. A problem that would
make a profiled worker fail on a node is an error (exit 1) naming the node and the fix.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.tools.collect import EXIT_BAD_INPUT, BadInput, FileFailed, NodeInfo, NodeLost, alive_nodes, connect

NSYS_TOOL = "nsys"
ROCPROF_TOOL = "rocprof-sys-python"
VERSION_TIMEOUT_S = 15.0
NODE_TIMEOUT_S = 120.0
FIXED_STATES = ("patched", "upstream-fixed")
HOOK_SETTING = 'RAY_RUNTIME_ENV_PLUGINS=\'[{"class": "nrlprof.rayfix.agent_hook.AgentHook"}]\''

EXIT_OK = 0
EXIT_PROBLEMS = 1
ERROR = "error"
WARNING = "warning"
NOTE = "note"


@dataclass
class ToolCheck:
    name: str
    path: str | None = None
    version: str | None = None
    detail: str = ""

    @property
    def found(self) -> bool:
        return self.path is not None


@dataclass
class NodeCheck:
    label: str
    node_id: str
    ip: str
    hostname: str
    error: str | None = None
    nsys: ToolCheck = field(default_factory=lambda: ToolCheck(NSYS_TOOL))
    rocprof: ToolCheck = field(default_factory=lambda: ToolCheck(ROCPROF_TOOL))
    cuda: bool = False
    cuda_detail: str = ""
    raylet_pid: int | None = None
    agent_hook: bool | None = None  # None: the environment could not be read
    agent_detail: str = ""
    plugin_files: dict[str, Any] = field(default_factory=dict)
    plugin_files_detail: str = ""
    output_dir: str = ""
    output_writable: bool | None = None
    output_detail: str = ""
    python_executable: str = ""
    python_version: str = ""

    def fix_state(self, key: str) -> str | None:
        entry = self.plugin_files.get(key)
        return entry.get("state") if isinstance(entry, dict) else None

    def fix_in_place(self, key: str) -> bool:
        return bool(self.agent_hook) or self.fix_state(key) in FIXED_STATES


@dataclass(frozen=True)
class Problem:
    severity: str
    node: str | None
    message: str
    fix: str = ""

    def describe(self) -> str:
        where = f"node {self.node}: " if self.node else ""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.severity}: {where}{self.message}.{fix}"


@dataclass
class DoctorReport:
    configured: bool
    plan: list[dict[str, Any]]
    output_dir: str
    driver_python: str
    driver_executable: str
    nodes: list[NodeCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def exit_code(self) -> int:
        return EXIT_PROBLEMS if self.errors else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = not self.errors
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# --------------------------------------------------------------------------- on each node


def tool_check(name: str, timeout_s: float = VERSION_TIMEOUT_S) -> ToolCheck:
    """Where `name` is on PATH and what `name --version` says."""
    check = ToolCheck(name, shutil.which(name))
    if check.path is None:
        check.detail = "not on PATH"
        return check
    try:
        done = subprocess.run(
            [check.path, "--version"], capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        check.detail = f"`{name} --version` did not finish within {timeout_s:.0f}s"
        return check
    except OSError as err:
        check.detail = f"`{name} --version` could not run: {err.strerror or err}"
        return check
    check.version = parse_version(done.stdout + "\n" + done.stderr)
    if done.returncode != 0:
        check.detail = f"`{name} --version` exited with {done.returncode}"
    return check


def parse_version(text: str) -> str | None:
    """`NVIDIA Nsight Systems version 2025.1.1.103-test` -> `2025.1.1.103-test`; else the first line."""
    match = re.search(r"\bv?(\d+(?:\.\d+)+[\w.+-]*)", text)
    if match:
        return match.group(1)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else None


def cuda_check() -> tuple[bool, str]:
    """A cheap look: the device node, else `nvidia-smi -L`."""
    if os.path.exists("/dev/nvidia0"):
        return True, "/dev/nvidia0"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False, "no /dev/nvidia0, no nvidia-smi"
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"nvidia-smi -L failed: {err}"
    gpus = [line for line in done.stdout.splitlines() if line.startswith("GPU")]
    return (done.returncode == 0 and bool(gpus)), f"nvidia-smi: {len(gpus)} GPU(s)"


def _read_proc(pid: str, name: str) -> list[str]:
    with open(f"/proc/{pid}/{name}", "rb") as handle:
        return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]


def find_raylet_pid(node_id: str) -> int | None:
    """The pid of the raylet running `node_id` (several raylets may share a machine, so the node id decides)."""
    wanted = f"--node_id={node_id}"
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = _read_proc(pid, "cmdline")
            if argv and argv[0].endswith("raylet") and wanted in argv:
                return int(pid)
    return None


def agent_check(node_id: str) -> tuple[int | None, bool | None, str]:
    """(raylet pid, whether the runtime-env agent's RAY_RUNTIME_ENV_PLUGINS lists nrlprof's hook, the source).

    The raylet starts the agent with its own environment. The agent's `/proc/<pid>/environ` is not read: the
    agent renames its process title, which overwrites part of that area.
    """
    from nrlprof.rayfix.plugins_env import PLUGINS_VARIABLE, agent_hook_listed

    pid = find_raylet_pid(node_id)
    if pid is None:
        value = os.environ.get(PLUGINS_VARIABLE)
        return None, agent_hook_listed(value), "raylet not found; judged from a worker's environment"
    try:
        environ = dict(item.partition("=")[::2] for item in _read_proc(str(pid), "environ"))
    except OSError as err:
        return pid, None, f"cannot read the environment of raylet pid {pid}: {err.strerror or err}"
    return pid, agent_hook_listed(environ.get(PLUGINS_VARIABLE)), f"environment of raylet pid {pid}"


def plugin_files_check() -> tuple[dict[str, Any], str]:
    try:
        from nrlprof.rayfix.patch_ray import inspect_ray
    except ImportError as err:
        return {}, f"nrlprof.rayfix.patch_ray unavailable: {err}"
    try:
        return inspect_ray(), ""
    except Exception as err:  # a broken Ray install must not hide the other checks
        return {}, f"inspecting Ray's plugin files failed: {type(err).__name__}: {err}"


def writable_check(directory: str) -> tuple[bool, str]:
    """Whether a file can be created in `directory`, or in the nearest existing parent it would be created in."""
    path = Path(directory)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return False, f"{existing} is not a directory"
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".nrlprof-doctor-"):
            pass
    except OSError as err:
        return False, f"cannot create a file in {existing}: {err.strerror or err}"
    return True, "writable" if existing == path else f"will be created (under {existing})"


def inspect_node(node_id: str, output_dir: str) -> dict[str, Any]:
    """Runs on the node: every check, as plain data."""
    nsys, rocprof = tool_check(NSYS_TOOL), tool_check(ROCPROF_TOOL)
    cuda, cuda_detail = cuda_check()
    raylet_pid, agent_hook, agent_detail = agent_check(node_id)
    files, files_detail = plugin_files_check()
    writable, writable_detail = writable_check(output_dir)
    return {
        "nsys": asdict(nsys),
        "rocprof": asdict(rocprof),
        "cuda": cuda,
        "cuda_detail": cuda_detail,
        "raylet_pid": raylet_pid,
        "agent_hook": agent_hook,
        "agent_detail": agent_detail,
        "plugin_files": files,
        "plugin_files_detail": files_detail,
        "output_dir": output_dir,
        "output_writable": writable,
        "output_detail": writable_detail,
        "python_executable": sys.executable,
        "python_version": python_version(),
    }


def python_version() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])


# --------------------------------------------------------------------------- driver


def node_check_from(node: NodeInfo, data: dict[str, Any]) -> NodeCheck:
    check = NodeCheck(node.label, node.node_id, node.ip, node.hostname)
    for key, value in data.items():
        setattr(check, key, ToolCheck(**value) if key in ("nsys", "rocprof") else value)
    return check


def check_nodes(nodes: list[NodeInfo], output_dir: str, timeout_s: float = NODE_TIMEOUT_S) -> list[NodeCheck]:
    import ray

    from nrlprof.tools.collect import get_from_node, pinned

    remote = ray.remote(max_retries=0)(inspect_node)
    refs = [remote.options(**pinned(n.node_id)).remote(n.node_id, output_dir) for n in nodes]
    checks = []
    for node, ref in zip(nodes, refs, strict=True):
        try:
            checks.append(node_check_from(node, get_from_node(ref, timeout_s, node, "running the checks")))
        except (NodeLost, FileFailed) as err:
            checks.append(NodeCheck(node.label, node.node_id, node.ip, node.hostname, error=str(err)))
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
    return checks


def describe_plan(plan: Any) -> list[dict[str, Any]]:
    return [
        {
            "backend": backend.kind,
            "patterns": [t.pattern for t in backend.targets],
            "steps": None if backend.steps is None else [[w.first, w.last] for w in backend.steps.windows],
        }
        for backend in plan.backends
    ]


def _tool_problems(check: NodeCheck, tool: ToolCheck, variable: str) -> list[Problem]:
    if tool.found:
        return []
    return [
        Problem(
            ERROR,
            check.label,
            f"{tool.name} is not on the PATH of the Ray processes, but {variable} selects workers for it",
            f"install it on node {check.label} and put its directory on PATH before `ray start` there "
            f"(actor creation fails with RuntimeEnvSetupError without it)",
        )
    ]


def _fix_problems(check: NodeCheck, key: str, tool: str) -> list[Problem]:
    if check.fix_in_place(key):
        return []
    state = check.fix_state(key) or check.plugin_files_detail or "unknown"
    return [
        Problem(
            ERROR,
            check.label,
            f"Ray's {key} plugin fix is not in place (runtime-env agent: "
            f"{'hook not listed' if check.agent_hook is False else check.agent_detail}; plugin file: {state}); "
            f"{tool} workers would lose their interpreter",
            f"run `nrlprof patch-ray` on node {check.label} and restart Ray there, "
            f"or set {HOOK_SETTING} before `ray start` on it",
        )
    ]


def node_problems(check: NodeCheck, plan: Any, report: DoctorReport, output_dir_given: bool) -> list[Problem]:
    if check.error:
        return [Problem(ERROR, check.label, f"the checks could not run: {check.error}", "see the node's Ray logs")]
    problems: list[Problem] = []
    if plan.backend("nsys") is not None:
        problems += _tool_problems(check, check.nsys, "NRL_NSYS_WORKER_PATTERNS")
        problems += _fix_problems(check, "nsight", "nsys")
        if not check.cuda:
            problems.append(Problem(WARNING, check.label, f"no NVIDIA GPU visible ({check.cuda_detail})"))
    if plan.backend("rocprof") is not None:
        problems += _tool_problems(check, check.rocprof, "NRL_ROCPROF_WORKER_PATTERNS")
        problems += _fix_problems(check, "rocprof_sys", "rocprof-sys")
    if not check.output_writable and (plan.backend("torch") is not None or output_dir_given):
        problems.append(
            Problem(
                ERROR,
                check.label,
                f"the torch output directory {check.output_dir} is not writable ({check.output_detail})",
                "set NRL_TORCH_PROFILE_DIR to a directory writable on every node",
            )
        )
    if check.python_version != report.driver_python:
        problems.append(
            Problem(
                ERROR if plan.active else WARNING,
                check.label,
                f"Python {check.python_version} ({check.python_executable}) differs from the driver's "
                f"{report.driver_python} ({report.driver_executable})",
                f"start Ray on node {check.label} from the same environment as the driver",
            )
        )
    return problems


def doctor(
    address: str | None = None,
    output_dir: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> DoctorReport:
    """Check every alive node; raises BadInput when no cluster is reachable, ConfigError for bad variables."""
    import ray

    from nrlprof.config.env import is_configured, load_plan

    environ = os.environ if environ is None else environ
    plan = load_plan(environ)
    directory = str(Path(output_dir or plan.torch.directory).expanduser().resolve())
    report = DoctorReport(
        configured=is_configured(environ) and plan.active,
        plan=describe_plan(plan),
        output_dir=directory,
        driver_python=python_version(),
        driver_executable=sys.executable,
    )
    initialised = connect(address)
    try:
        report.nodes = check_nodes(alive_nodes(), directory)
    finally:
        if initialised:
            ray.shutdown()
    for check in report.nodes:
        report.problems += node_problems(check, plan, report, output_dir is not None)
    if not report.configured:
        report.problems.append(Problem(NOTE, None, "nothing is configured: no NRL_* profiling variable is set"))
    return report


# --------------------------------------------------------------------------- output


def _tool_cell(tool: ToolCheck) -> str:
    if not tool.found:
        return "[red]missing[/]" if tool.name == NSYS_TOOL else "missing"
    return f"[green]{tool.version or '?'}[/]" + (f" ({tool.detail})" if tool.detail else "")


def _fix_cell(check: NodeCheck) -> str:
    if check.agent_hook:
        return "[green]in memory[/]"
    states = {key: check.fix_state(key) or "?" for key in ("nsight", "rocprof_sys")}
    text = ", ".join(f"{key}: {state}" for key, state in states.items())
    return f"[green]{text}[/]" if states["nsight"] in FIXED_STATES else f"[yellow]{text}[/]"


def _output_cell(check: NodeCheck) -> str:
    from rich.markup import escape

    return f"[{'green' if check.output_writable else 'red'}]{escape(check.output_detail)}[/]"


def _plan_text(plan: list[dict[str, Any]]) -> str:
    def steps(windows: list[list[int]] | None) -> str:
        if not windows:
            return ""
        return " steps " + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in windows)

    return "; ".join(f"{p['backend']}: {','.join(p['patterns'])}{steps(p['steps'])}" for p in plan) or "none"


def render(report: DoctorReport, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="nrlprof doctor")
    for column in ("node", "nsys", "rocprof-sys", "CUDA", "Ray plugin fix", "output dir", "Python"):
        table.add_column(column)
    for check in report.nodes:
        if check.error:
            table.add_row(check.label, f"[red]{escape(check.error)}[/]", "", "", "", "", "")
            continue
        python = check.python_version + ("" if check.python_version == report.driver_python else " [red](≠ driver)[/]")
        cuda = f"yes ({check.cuda_detail})" if check.cuda else "no"
        table.add_row(check.label, _tool_cell(check.nsys), _tool_cell(check.rocprof), cuda, _fix_cell(check),
                      _output_cell(check), python)  # fmt: skip
    console.print(table)
    console.print(
        f"plan: {_plan_text(report.plan)}; output dir: {report.output_dir}; driver Python {report.driver_python}",
        markup=False,
        highlight=False,
    )
    for problem in report.problems:
        style = {ERROR: "red", WARNING: "yellow"}.get(problem.severity, "cyan")
        console.print(f"[{style}]{escape(problem.describe())}[/]", highlight=False)
    if not report.errors:
        console.print("[green]no problem found[/]")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or the local one)")
    parser.add_argument("--output-dir", default=None, help="torch output directory to check (default: the plan's)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from nrlprof.errors import ConfigError

    try:
        report = doctor(address=args.address, output_dir=args.output_dir)
    except (BadInput, ConfigError) as err:
        print(f"nrlprof doctor: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(report.to_json())
    else:
        render(report, Console())
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nrlprof doctor", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
