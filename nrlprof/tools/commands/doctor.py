"""`nrlprof doctor`: the checks of every node (tools.check.doctor), as a table or JSON."""

from __future__ import annotations

import argparse
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.rayfix.names import FIXED_STATES
from nrlprof.tools.check.canary import CAPTURE_TIMEOUT_S
from nrlprof.tools.check.doctor import ERROR, WARNING, DoctorReport, NodeCheck, doctor
from nrlprof.tools.check.node import NSYS_TOOL, Interpreter, ToolCheck
from nrlprof.tools.commands.options import add_option, positive_seconds


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
    for check in report.nodes:
        if not check.error:
            console.print(_interpreters_text(check), markup=False, highlight=False)
        for result in (check.canary or {}).get("results", []):
            state = "ok" if result["ok"] else "FAILED"
            took = f"{result['seconds']:.1f}s"
            line = f"node {check.label}: {result['backend']} canary {state} in {took}: {result['detail']}"
            console.print(line, markup=False, highlight=False)
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


def _interpreters_text(check: NodeCheck) -> str:
    def one(found: Interpreter) -> str:
        ray = f" (Ray at {found.ray_dir})" if found.ray_dir else ""
        binary = f" = {found.executable}" if found.executable and found.executable != found.command else ""
        return f"{found.command or '?'}{binary}{ray}"

    return f"node {check.label}: runtime-env agent {one(check.agent)}; workers {one(check.workers)}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "address", "Ray cluster address (default: RAY_ADDRESS or the local one)")
    parser.add_argument("--output-dir", default=None, help="torch output directory to check (default: the plan's)")
    capture = "also run a short real capture on every node with each backend"
    parser.add_argument("--capture", action="store_true", help=capture)
    timeout = f"with --capture: how long each capture may take (default: {CAPTURE_TIMEOUT_S:.0f})"
    parser.add_argument("--capture-timeout", type=positive_seconds, default=None, metavar="SECONDS", help=timeout)
    add_option(parser, "json", "print the report as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console

    capture, capture_timeout = getattr(args, "capture", False), getattr(args, "capture_timeout", None)
    if capture_timeout is not None and not capture:
        raise ToolError(f"--capture-timeout {capture_timeout:g} limits the captures of --capture: add --capture")
    report = doctor(address=args.address, output_dir=args.output_dir, capture=capture,
                    capture_timeout_s=capture_timeout or CAPTURE_TIMEOUT_S)  # fmt: skip
    if args.json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        render(report, Console())
    return report.exit_code
