"""How large a plan's windows will be, from the windows the same job already wrote (`plan --address`).

On every node, each manifest record of the job (chosen as `collect` chooses it) gives a window's backend, worker,
rank and steps, and its files' sizes are read there. Per backend and worker, the rate is the bytes per step of one
process (its windows' bytes over their steps); a window of the plan is expected to hold that rate times its steps,
per rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nrlprof.config.plan import Plan
from nrlprof.layout import LOGS_DIR, MANIFEST_DIR, MANIFEST_GLOB
from nrlprof.manifest import parse_line
from nrlprof.tools.cluster import alive_nodes, connected, run_on_nodes
from nrlprof.tools.collect.collector import choose_sessions
from nrlprof.tools.collect.pull import LIST_TIMEOUT_S
from nrlprof.tools.collect.scan import UNWRITABLE_BY_OTHERS, node_temp_dir, session_dirs
from nrlprof.workers.matching import name_matches


def written_windows_here(sessions: list[str] | None) -> list[dict[str, Any]]:
    """Runs on a node: per manifest record of the sessions, backend, worker, rank, steps and its files' bytes."""
    windows = []
    for session in session_dirs(
        Path(os.path.realpath(node_temp_dir())), None, None if sessions is None else set(sessions)
    ):
        for manifest in sorted((session / LOGS_DIR / MANIFEST_DIR).glob(MANIFEST_GLOB)):
            info = os.lstat(manifest)
            if not manifest.is_file() or info.st_uid != os.getuid() or info.st_mode & UNWRITABLE_BY_OTHERS:
                continue  # collect's rule: only manifests of Ray's user that no one else can write
            for raw in manifest.read_bytes().splitlines():
                record = parse_line(raw)
                if isinstance(record, dict):
                    windows.append(_window(record))
    return [w for w in windows if w is not None]


def _window(record: dict[str, Any]) -> dict[str, Any] | None:
    steps, files = record.get("steps"), record.get("files")
    if not (isinstance(steps, list) and steps and isinstance(files, list)):
        return None
    size = 0
    for name in files:
        try:
            size += os.stat(name).st_size if isinstance(name, str) else 0
        except OSError:
            continue
    if not size:
        return None
    return {"backend": str(record.get("backend")), "worker": str(record.get("worker")), "rank": record.get("rank"),
            "window": str(record.get("window", "")), "steps": len(steps), "bytes": size}  # fmt: skip


@dataclass(frozen=True)
class Rate:
    backend: str
    worker: str
    bytes_per_step: float  # of one process
    windows: tuple[str, ...]  # the windows measured


def rates(windows: list[dict[str, Any]]) -> list[Rate]:
    """Per backend and worker: bytes per step of one process, over every window written."""
    totals: dict[tuple[str, str], list] = {}
    for window in windows:
        entry = totals.setdefault((window["backend"], window["worker"]), [0, 0, set()])
        entry[0] += window["bytes"]
        entry[1] += window["steps"]
        entry[2].add(window["window"])
    return [Rate(backend, worker, size / steps, tuple(sorted(names)))
            for (backend, worker), (size, steps, names) in sorted(totals.items())]  # fmt: skip


def expected_sizes(plan: Plan, measured: list[Rate]) -> list[dict[str, Any]]:
    """Per backend window of the plan and worker whose earlier windows give a rate: the bytes expected per rank."""
    rows = []
    for backend in plan.backends:
        for rate in (r for r in measured if r.backend == backend.kind):
            if not any(name_matches(t, rate.worker) for t in backend.targets):
                continue
            for window in backend.steps.windows if backend.steps else ():
                steps = window.last - window.first + 1
                rows.append({"backend": backend.kind, "worker": rate.worker, "window": window.label,
                             "bytes_per_rank": round(rate.bytes_per_step * steps), "bytes_per_step":
                             round(rate.bytes_per_step), "from_windows": list(rate.windows)})  # fmt: skip
    return rows


def job_rates(address: str | None, timeout_s: float = LIST_TIMEOUT_S) -> list[Rate]:
    """The rates of the job on the cluster at `address`, from every node that answers."""
    with connected(address):
        nodes = alive_nodes()
        sessions = choose_sessions(nodes, None, False, timeout_s)
        answers = run_on_nodes(written_windows_here, nodes, lambda node: (sessions,), timeout_s, "sizing its windows")
    return rates([window for answer in answers if answer.value for window in answer.value])
