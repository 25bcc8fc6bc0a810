"""`nrlprof doctor`: check every node of a running Ray cluster for what profiled workers need.

Per node (one task pinned to it): `nsys` and `rocprof-sys-python` on the PATH the Ray processes have, with
their versions; a visible NVIDIA GPU; Ray's profiler-plugin fix, in memory (the node's runtime-env agent was
started with `RAY_RUNTIME_ENV_PLUGINS` listing nrlprof's hook) or on disk (`nrlprof patch-ray`); whether the
torch output directory is writable there; and whether its Python matches the driver's. A problem that would
make a profiled worker fail on a node is an error (exit 1) naming the node and the fix.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nrlprof import exit_codes
from nrlprof.backends.cupti_clash import CLASH, cupti_injection, points_at_cupti
from nrlprof.rayfix.names import FIXED_STATES, HOOK_SETTING
from nrlprof.tools.check.canary import CAPTURE_TIMEOUT_S, canaries_time_s, run_canaries
from nrlprof.tools.check.dcgm import PAUSE, RESUME
from nrlprof.tools.check.node import NSYS_TOOL, ROCPROF_TOOL, Interpreter, ToolCheck, inspect_node, python_version
from nrlprof.tools.cluster import NodeInfo, alive_nodes, connected, run_on_nodes

NODE_TIMEOUT_S = 120.0
CANARY_BACKENDS = ("nsys", "torch")
ERROR = "error"
WARNING = "warning"
NOTE = "note"


@dataclass
class NodeCheck:
    label: str
    node_id: str
    ip: str
    hostname: str
    error: str | None = None
    nsys: ToolCheck = field(default_factory=lambda: ToolCheck(NSYS_TOOL))
    nsys_options: dict[str, list[str]] | None = None  # what `nsys profile --help` lists there: long, short names
    nsys_options_detail: str = ""
    rocprof: ToolCheck = field(default_factory=lambda: ToolCheck(ROCPROF_TOOL))
    cuda: bool = False
    cuda_detail: str = ""
    raylet_pid: int | None = None
    agent: Interpreter = field(default_factory=Interpreter)  # the runtime-env agent: runs Ray's profiler plugins
    workers: Interpreter = field(default_factory=Interpreter)  # the raylet's default worker command
    agent_hook: bool | None = None  # None: the environment could not be read
    agent_fix: bool | None = None  # the runtime-env agent builds the fixed command (hook or fixed files it imports)
    agent_fix_reason: str = ""
    agent_detail: str = ""
    plugin_files: dict[str, Any] = field(default_factory=dict)
    plugin_files_detail: str = ""
    output_dir: str = ""
    output_writable: bool | None = None
    output_detail: str = ""
    python_executable: str = ""
    python_version: str = ""
    canary: dict[str, Any] | None = None  # `--capture`: {"gpu": bool, "results": [CanaryResult as dict]}
    nvtx_injection: str = ""  # NVTX_INJECTION64_PATH in the environment Ray workers start with there
    dcgm_profiling: bool | None = None  # DCGM's Profiling module loaded there (None: no DCGM to ask)
    dcgm_detail: str = ""

    def fix_state(self, key: str) -> str | None:
        entry = self.plugin_files.get(key)
        return entry.get("state") if isinstance(entry, dict) else None

    def fix_in_place(self, key: str) -> bool:
        if self.agent_fix is not None:
            return self.agent_fix
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
        return exit_codes.outcome(not self.errors)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": not self.errors}


# --------------------------------------------------------------------------- driver


def node_check_from(node: NodeInfo, data: dict[str, Any]) -> NodeCheck:
    check = NodeCheck(node.label, node.node_id, node.ip, node.hostname)
    kinds = {"nsys": ToolCheck, "rocprof": ToolCheck, "agent": Interpreter, "workers": Interpreter}
    for key, value in data.items():
        setattr(check, key, kinds[key](**value) if key in kinds else value)
    return check


def check_nodes(nodes: list[NodeInfo], output_dir: str, timeout_s: float = NODE_TIMEOUT_S) -> list[NodeCheck]:
    answers = run_on_nodes(inspect_node, nodes, lambda n: (n.node_id, output_dir), timeout_s, "running the checks")
    return [node_check_from(a.node, a.value if a.error is None else {"error": a.error}) for a in answers]


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
            f"{'hook not listed' if check.agent_hook is False else check.agent_detail}; plugin file: {state}"
            f"{'; ' + check.agent_fix_reason if check.agent_fix is False else ''}); "
            f"{tool} workers would lose their interpreter",
            f"run `{_patch_command(check)}` on node {check.label} and restart Ray there, "
            f"or set {HOOK_SETTING} before `ray start` on it",
        )
    ]


def _nsys_option_problems(check: NodeCheck, plan: Any) -> list[Problem]:
    """The plan's nsys options that the node's nsys does not know: it would not launch the workers."""
    from nrlprof.config.nsys.known import NsysOptions, unknown_nsys_options

    if not check.nsys.found or check.nsys_options is None:
        return []
    known = NsysOptions(frozenset(check.nsys_options["long"]), frozenset(check.nsys_options["short"]))
    unknown = unknown_nsys_options(plan, known)
    if not unknown:
        return []
    version = f" {check.nsys.version}" if check.nsys.version else ""
    return [
        Problem(
            ERROR,
            check.label,
            f"nsys{version} ({check.nsys.path}) does not know the plan's option(s) {', '.join(unknown)}: "
            "it would refuse to launch the profiled workers",
            "remove them from NRL_NSYS_EXTRA_OPTIONS (or the config file), or install an nsys that has them "
            "(`nsys profile --help` lists its options)",
        )
    ]


def cupti_problem(node: str | None, path: str) -> Problem:
    """NVTX_INJECTION64_PATH at CUPTI where a torch window will run (the driver's environment: node None)."""
    return Problem(
        WARNING,
        node,
        CLASH.format(path=path) + "; nrlprof unsets it in the processes of its torch windows, so only a process that "
        "sets it again records no kernel",
        "unset NVTX_INJECTION64_PATH in the job's environment (or in the image), or leave it to nrlprof",
    )


def dcgm_problem(node: str) -> Problem:
    """DCGM's profiling metrics switched on: the driver's profiling lock is theirs on the whole node (DCGM #56)."""
    return Problem(
        WARNING,
        node,
        "DCGM's profiling metrics are switched on (its Profiling module is loaded: dcgm-exporter's DCGM_FI_PROF_* "
        "counters, or a `dcgmi dmon` of fields 1001+): they hold the driver's profiling lock for the whole node, so "
        "CUPTI's and Nsight's counters (Nsight Compute, nsys --gpu-metrics-devices, CUPTI's profiling API) cannot "
        "be had on any of its GPUs (DCGM #56); where they are paused already, this stays said",
        f"`{PAUSE}` on the node for the profiling run, `{RESUME}` after",
    )


def _patch_command(check: NodeCheck) -> str:
    """`nrlprof patch-ray`, aimed at the Ray the runtime-env agent imports when that is known."""
    if check.agent.ray_dir:
        return f"nrlprof patch-ray --ray-dir {shlex.quote(check.agent.ray_dir)}"
    return "nrlprof patch-ray"


def node_problems(check: NodeCheck, plan: Any, report: DoctorReport, output_dir_given: bool) -> list[Problem]:
    if check.error:
        return [Problem(ERROR, check.label, f"the checks could not run: {check.error}", "see the node's Ray logs")]
    problems: list[Problem] = []
    problems += _nsys_option_problems(check, plan)
    if plan.backend("nsys") is not None:
        problems += _tool_problems(check, check.nsys, "NRL_NSYS_WORKER_PATTERNS")
        problems += _fix_problems(check, "nsight", "nsys")
        if not check.cuda:
            problems.append(Problem(WARNING, check.label, f"no NVIDIA GPU visible ({check.cuda_detail})"))
    if plan.backend("rocprof") is not None:
        problems += _tool_problems(check, check.rocprof, "NRL_ROCPROF_WORKER_PATTERNS")
        problems += _fix_problems(check, "rocprof_sys", "rocprof-sys")
    if plan.backend("torch") is not None and points_at_cupti(check.nvtx_injection):
        problems.append(cupti_problem(check.label, check.nvtx_injection))
    if check.dcgm_profiling:
        problems.append(dcgm_problem(check.label))
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
    capture: bool = False,
    capture_timeout_s: float = CAPTURE_TIMEOUT_S,
) -> DoctorReport:
    """Check every alive node (`capture`: and run a canary capture there with each configured backend, each
    given `capture_timeout_s`).

    Raises BadInput when no cluster is reachable, ConfigError for bad variables.
    """
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
    with connected(address):
        nodes = alive_nodes()
        report.nodes = check_nodes(nodes, directory)
        if capture:
            add_canaries(report.nodes, nodes, canary_backends(plan), capture_timeout_s)
    for check in report.nodes:
        report.problems += node_problems(check, plan, report, output_dir is not None)
        report.problems += canary_problems(check)
    if plan.backend("torch") is not None and (path := cupti_injection(environ)):
        report.problems.append(cupti_problem(None, path))
    if not report.configured:
        report.problems.append(Problem(NOTE, None, "nothing is configured: no NRL_* profiling variable is set"))
    return report


def canary_backends(plan: Any) -> list[str]:
    """The configured backends a canary can capture with; both when none is configured."""
    kinds = [kind for kind in CANARY_BACKENDS if plan.backend(kind) is not None]
    return kinds or list(CANARY_BACKENDS)


def add_canaries(checks: list[NodeCheck], nodes: list[NodeInfo], backends: list[str], capture_timeout_s: float) -> None:
    answers = run_on_nodes(run_canaries, nodes, lambda n: (backends, capture_timeout_s),
                           canaries_time_s(backends, capture_timeout_s), "running the canary")  # fmt: skip
    by_id = {a.node.node_id: a for a in answers}
    for check in checks:
        answer = by_id.get(check.node_id)
        if answer is not None:
            failed = {"gpu": False, "results": [], "error": answer.error}
            check.canary = answer.value if answer.error is None else failed


def canary_problems(check: NodeCheck) -> list[Problem]:
    if check.canary is None:
        return []
    if check.canary.get("error"):
        return [Problem(ERROR, check.label, f"the canary capture could not run: {check.canary['error']}")]
    problems = []
    if not check.canary["gpu"]:
        problems.append(Problem(NOTE, check.label, "no GPU visible: the canary captured CPU work only"))
    for result in check.canary["results"]:
        if not result["ok"]:
            problems.append(
                Problem(
                    ERROR,
                    check.label,
                    f"the {result['backend']} canary capture failed: {result['detail']}",
                    f"fix {result['backend']} on node {check.label} before a long job",
                )
            )
    return problems


# --------------------------------------------------------------------------- output
