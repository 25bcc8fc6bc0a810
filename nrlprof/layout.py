"""Every file and directory name nrlprof writes or reads back: one place to decide, one place to parse.

- nsys: `<ray session dir>/logs/nsight/<worker>_<steps>_%p` as `-o`; nsys writes `<name>.nsys-rep`
  (`--capture-range-end=stop`) or `<name>.<k>.nsys-rep`, one per capture range (`repeat:K`).
- rocprof-sys: `<ray session dir>/logs/rocprof_sys/`.
- torch: `<dir>/<worker>/<rank>/<worker>.rank<r>.<label>.<pid>[.<n>].pt.trace.json[.gz]`,
  the controller's directly in `<dir>/`; label `steps3-4`, or `step3.<method>` in discrete mode.
- memory: `<dir>/<worker>/<rank>/<worker>.rank<r>.steps<a>-<b>.<pid>.memory.json` (per-step figures) and
  `.pickle` (the CUDA allocator snapshot); `...oom.<pid>.pickle` when the process ran out of memory.
- manifests: `<ray session dir>/logs/nrlprof/manifest-<host>-<pid>.jsonl`, or
  `<torch dir>/.nrlprof/` when a process has no Ray session.
- steps inside the files: `ProfilerStep#<n>` (torch's own step annotation) in a trace, an NVTX range
  `step <n>` in nrlprof's NVTX domain in an nsys capture; `<n>` at most 18 digits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LOGS_DIR = "logs"
NSIGHT_DIR = "nsight"
ROCPROF_DIR = "rocprof_sys"
MANIFEST_DIR = "nrlprof"
REPORT_DIRS = (NSIGHT_DIR, ROCPROF_DIR)
MANIFEST_GLOB = "manifest-*.jsonl"
CONTROLLER = "controller"

NSYS_REPORT_SUFFIX = ".nsys-rep"
NSYS_SUFFIXES = (NSYS_REPORT_SUFFIX, ".qdrep")
NSYS_UNFINISHED_SUFFIX = ".qdstrm"
NSYS_EXPORT_SUFFIX = ".sqlite"  # `nsys export --type sqlite`, beside the report or anywhere under the inputs
TRACE_SUFFIX = ".pt.trace.json"
TRACE_SUFFIXES = (TRACE_SUFFIX, TRACE_SUFFIX + ".gz")
MEMORY_FIGURES_SUFFIX = ".memory.json"
MEMORY_SNAPSHOT_SUFFIX = ".pickle"
# Written by the nsight plugin's dry run at actor creation; removed right after.
DRY_RUN_PREFIX = "nrlprof-dryrun-"
PROFILER_STEP_PREFIX = "ProfilerStep#"
NVTX_STEP_PREFIX = "step "
NVTX_DOMAIN = "nrlprof"  # of the step ranges and annotations nrlprof writes (ranges/nvtx.py)
MAX_STEP_DIGITS = 18

_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
# <worker>.rank<r>.steps3-4.<pid>[.<n>].pt.trace.json; discrete mode: <worker>.rank<r>.step3.<method>.<pid>...
_TRACE_NAME = re.compile(
    r"^(?P<worker>.+?)(?:\.rank(?P<rank>\d+))?\.steps?(?P<window>[\d_-]+)(?:\.[^.]+?)??"
    r"\.(?P<pid>\d+)(?:\.\d+)?\.pt\.trace"
)
# <worker>_<steps>_<pid>[.<k>].nsys-rep, steps `3`, `3-4` or `1_5-6`
_NSYS_NAME = re.compile(r"^(?P<worker>.+?)_(?P<window>\d+(?:-\d+)?(?:_\d+(?:-\d+)?)*)_(?P<pid>\d+)(?:[._-]\d+)*$")


def file_safe(name: str) -> str:
    """A name usable in file and directory names on every node and in a shell."""
    return _UNSAFE_FILE_CHARS.sub("_", name).strip("._") or "worker"


# --- Ray session directories -----------------------------------------------------------------------------------


def session_logs(session_dir: str | Path) -> Path:
    return Path(session_dir) / LOGS_DIR


def nsight_dir(session_dir: str | Path) -> Path:
    return session_logs(session_dir) / NSIGHT_DIR


def manifest_dir(session_dir: str | None, torch_dir: str) -> Path:
    if session_dir:
        return session_logs(session_dir) / MANIFEST_DIR
    return Path(torch_dir) / f".{MANIFEST_DIR}"


def manifest_path(directory: str | Path, host: str, pid: int) -> Path:
    return Path(directory) / f"manifest-{host}-{pid}.jsonl"


# --- nsys -------------------------------------------------------------------------------------------------------


def nsys_output_name(worker_file_name: str, steps_label: str) -> str:
    """`<worker>_<steps>_%p`: no ':' or spaces; nsys replaces %p with the pid of the process it launched."""
    return f"{worker_file_name}_{steps_label}_%p"


def nsys_reports(output: str | Path, launched_pid: int) -> list[Path]:
    """The reports nsys wrote for output name `output` (`%p` = `launched_pid`), in capture order."""
    base = Path(str(output).replace("%p", str(launched_pid)))
    found = []
    single = base.with_name(base.name + NSYS_REPORT_SUFFIX)
    if single.is_file():
        found.append(single)
    repeated = re.compile(re.escape(base.name) + r"\.(\d+)" + re.escape(NSYS_REPORT_SUFFIX) + "$")
    numbered = []
    if base.parent.is_dir():
        for entry in os.scandir(base.parent):
            match = repeated.match(entry.name)
            if match and entry.is_file():
                numbered.append((int(match.group(1)), Path(entry.path)))
    return found + [path for _, path in sorted(numbered)]


def nsys_unfinished(output: str | Path, launched_pid: int) -> list[Path]:
    """`.qdstrm` files nsys left where its importer failed: the capture exists but no report does."""
    base = Path(str(output).replace("%p", str(launched_pid)))
    if not base.parent.is_dir():
        return []
    return sorted(
        Path(e.path)
        for e in os.scandir(base.parent)
        if e.name.startswith(base.name) and e.name.endswith(NSYS_UNFINISHED_SUFFIX)
    )


@dataclass(frozen=True)
class NsysName:
    worker: str
    window: str
    pid: int


def parse_nsys_name(stem: str) -> NsysName | None:
    match = _NSYS_NAME.match(stem)
    if match is None:
        return None
    return NsysName(match["worker"], match["window"], int(match["pid"]))


def nsys_stem(file_name: str) -> str:
    """The name a report and its SQLite export share: without `.sqlite`, then without `.nsys-rep` / `.qdrep`."""
    name = file_name.removesuffix(NSYS_EXPORT_SUFFIX)
    return next((name.removesuffix(s) for s in NSYS_SUFFIXES if name.endswith(s)), name)


# --- steps ------------------------------------------------------------------------------------------------------


def step_number(name: str, prefix: str) -> int | None:
    """n of `<prefix><n>` (n: 1 to MAX_STEP_DIGITS ASCII digits); None for any other name."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :]
    if digits.isascii() and digits.isdigit() and len(digits) <= MAX_STEP_DIGITS:
        return int(digits)
    return None


_RANGE_STEP = re.compile(rf"^(?P<label>.*) \[step (?P<step>\d{{1,{MAX_STEP_DIGITS}}})\]$", re.DOTALL)


def range_label(name: str) -> tuple[str, int | None]:
    """(label, step) of a range named by `nrlprof.ranges.names.range_name`; (name, None) for any other name."""
    match = _RANGE_STEP.match(name) if name.endswith("]") else None
    return (match["label"], int(match["step"])) if match else (name, None)


# --- torch ------------------------------------------------------------------------------------------------------


def trace_directory(torch_dir: str, worker_file_name: str | None, rank: int | None) -> Path:
    """`<dir>/<worker>/<rank>/` for workers; `<dir>/` for the controller."""
    base = Path(torch_dir)
    if worker_file_name is None:
        return base
    return base / worker_file_name / str(rank if rank is not None else 0)


def trace_file_name(worker_file_name: str, rank: int | None, label: str, pid: int, gzip: bool) -> str:
    """`<worker>.rank<r>.<label>.<pid>.pt.trace.json`, label `steps3-4` or (discrete) `step3.<method>`."""
    return memory_file_name(worker_file_name, rank, label, pid, TRACE_SUFFIXES[1] if gzip else TRACE_SUFFIX)


def memory_file_name(worker_file_name: str, rank: int | None, label: str, pid: int, suffix: str) -> str:
    """`<worker>.rank<r>.<label>.<pid><suffix>`, named like the torch traces; label `steps3-4` or `oom`."""
    rank_part = "" if rank is None else f".rank{rank}"
    return f"{worker_file_name}{rank_part}.{label}.{pid}{suffix}"


def unused_path(path: Path, taken: Callable[[Path], bool] = Path.exists) -> Path:
    """The path itself, or with `.1`, `.2`... before the suffixes: a later window never overwrites."""
    if not taken(path):
        return path
    stem, dot, suffixes = path.name.partition(".pt.trace")
    counter = 1
    while True:
        candidate = path.with_name(f"{stem}.{counter}{dot}{suffixes}")
        if not taken(candidate):
            return candidate
        counter += 1


@dataclass(frozen=True)
class TraceName:
    worker: str
    rank: int | None
    window: str
    pid: int


def parse_trace_name(name: str) -> TraceName | None:
    match = _TRACE_NAME.match(name)
    if match is None:
        return None
    rank = match["rank"]
    return TraceName(match["worker"], None if rank is None else int(rank), match["window"], int(match["pid"]))
