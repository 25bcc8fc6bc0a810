"""`nrlprof plan`: what the current variables/config would profile, the commands, and where files go."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.backends import backend_class
from nrlprof.config.env import load_plan
from nrlprof.config.nsys_options import steps_label
from nrlprof.config.plan import NSYS, ROCPROF, TORCH, BackendPlan, Plan
from nrlprof.rayfix.fix import render_tool_options
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_worker

NSIGHT_DIR = "<ray session dir>/logs/nsight"
ROCPROF_DIR = "<ray session dir>/logs/rocprof_sys"


@dataclass
class BackendView:
    kind: str
    targets: list[dict]
    windows: list[str]
    command: str
    files: list[dict]
    notes: list[str] = field(default_factory=list)


def _example_identity(backend: BackendPlan) -> WorkerIdentity:
    return WorkerIdentity("Worker", None, 0, explicit_name="WORKER")


def _command(backend: BackendPlan, interpreter: str) -> str:
    identity = _example_identity(backend)
    if backend.kind == NSYS:
        config = dict(backend_class(NSYS).runtime_env_fragment(backend, identity)["_nsight"])
        flags = config.pop("flags", [])
        name = config.pop("o").replace("WORKER", "<worker>", 1)
        output = name if Path(name).is_absolute() else f"{NSIGHT_DIR}/{name}"
        argv = ["nsys", "profile", *render_tool_options(config), "-o", output, *[f"--{f}" for f in flags]]
        return shlex.join(argv) + f" {shlex.quote(interpreter)} default_worker.py ..."
    if backend.kind == ROCPROF:
        fragment = backend_class(ROCPROF).runtime_env_fragment(backend, identity)["_rocprof_sys"]
        argv = ["rocprof-sys-python", *render_tool_options(fragment["args"]), "--"]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(fragment["env"].items()))
        return f"{env} PYTHON_EXECUTABLE={shlex.quote(interpreter)} {shlex.join(argv)} default_worker.py ..."
    return "(in-process: torch.profiler.profile per window, no wrapper)"


def _files(plan: Plan, backend: BackendPlan) -> list[dict]:
    label = steps_label(backend.steps)
    if backend.kind == NSYS:
        return [{"node": "each node running a matched worker", "path": f"{NSIGHT_DIR}/<worker>_{label}_<pid>.nsys-rep"}]
    if backend.kind == ROCPROF:
        where = f"{backend.output_dir}/<worker>/<rank>" if backend.output_dir else ROCPROF_DIR
        return [{"node": "each node running a matched worker", "path": f"{where}/<worker>_rank<rank>_*"}]
    files = []
    suffix = ".pt.trace.json.gz" if plan.torch.gzip else ".pt.trace.json"
    directory = Path(plan.torch.directory).expanduser().resolve()
    for window in backend.steps.windows if backend.steps else ():
        worker = f"{directory}/<worker>/<rank>/<worker>.rank<rank>.steps{window.label}.<pid>{suffix}"
        files.append({"node": "each node running a matched worker", "path": worker})
        files.append({"node": "the driver's node", "path": f"{directory}/controller.steps{window.label}.<pid>{suffix}"})
    return files


def describe(plan: Plan, interpreter: str = sys.executable) -> list[BackendView]:
    views = []
    for backend in plan.backends:
        targets = [
            {
                "pattern": t.pattern,
                "ranks": "all" if t.ranks is None else sorted(t.ranks),
                "discrete": t.discrete,
                "methods": list(t.methods),
            }
            for t in backend.targets
        ]
        windows = ["whole lifetime"] if backend.steps is None else [w.label for w in backend.steps.windows]
        view = BackendView(backend.kind, targets, windows, _command(backend, interpreter), _files(plan, backend))
        if backend.kind == TORCH:
            view.notes.append(f"torch traces go to {Path(plan.torch.directory).resolve()} on each node")
        if backend.kind == NSYS and backend.output_dir is None:
            view.notes.append(
                "nsys reports stay on the node that ran the worker: `nrlprof collect --to DIR` gathers them"
            )
        views.append(view)
    return views


def live_matches(plan: Plan, address: str | None) -> list[dict]:
    """Alive actors of a reachable cluster that the plan would profile (ranks by creation order)."""
    import ray
    from ray.util.state import list_actors

    if not ray.is_initialized():
        ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False)
    rows = []
    counters: dict[str, int] = {}
    for actor in list_actors(filters=[("state", "=", "ALIVE")], limit=10_000):
        probe = WorkerIdentity(actor.class_name, actor.name or None, 0)
        rank = counters.get(probe.name, 0)
        counters[probe.name] = rank + 1
        identity = WorkerIdentity(actor.class_name, actor.name or None, rank)
        for match in match_worker(plan, identity):
            rows.append(
                {
                    "actor_id": actor.actor_id,
                    "worker": identity.name,
                    "rank": rank,
                    "backend": match.backend.kind,
                    "pattern": match.target.pattern,
                    "node_id": actor.node_id,
                }
            )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--address", help="also match the live actors of this running cluster ('auto' for the local one)"
    )


def run(args: argparse.Namespace) -> int:
    plan = load_plan(os.environ)
    if not plan.active:
        print("nothing is configured: set NRL_NSYS_* / NRL_TORCH_PROFILE_* / NRL_ROCPROF_* or NRL_PROFILE_CONFIG")
        return 0
    views = describe(plan)
    live = live_matches(plan, args.address) if args.address else None
    if args.json:
        print(json.dumps({"backends": [v.__dict__ for v in views], "live": live}, indent=2))
        return 0
    _print(views, live)
    return 0


def _print(views: list[BackendView], live: list[dict] | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for view in views:
        console.rule(f"[bold]{view.kind}")
        table = Table("pattern", "ranks", "discrete", "methods")
        for t in view.targets:
            table.add_row(t["pattern"], str(t["ranks"]), str(t["discrete"]), ",".join(t["methods"]) or "-")
        console.print(table)
        console.print(f"windows: {', '.join(view.windows)}")
        console.print(f"command: {view.command}", soft_wrap=True)
        for entry in view.files:
            console.print(f"files:   {entry['path']}  [dim]({entry['node']})[/dim]", soft_wrap=True)
        for note in view.notes:
            console.print(f"note:    {note}")
    if live is not None:
        table = Table("worker", "rank", "backend", "pattern", "node", title="live actors that would be profiled")
        for row in live:
            table.add_row(row["worker"], str(row["rank"]), row["backend"], row["pattern"], row["node_id"][:12])
        console.print(table)
