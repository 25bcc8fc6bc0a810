"""Summarise a run's profiles: per worker and step, wall time and annotated ranges; top operators and kernels.

`summarize()` returns a `Summary` (figures.model; its `to_json()` is `summary --json`); the terminal and
HTML views of it live in `nrlprof.tools.render`. Torch traces are read one by one (figures.trace_stats),
several at once (figures.trace_pool), and combined per worker rank. Nsight Systems captures give the same
per-step figures from their SQLite export (figures.nsys_capture), and whole-report tables from `nsys stats`
when nsys is on PATH. A trace, manifest or nsys report that cannot be read (no export beside it and no nsys to
make one, or an export that fails) is listed in `skipped`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from nrlprof.errors import ToolError
from nrlprof.layout import range_label
from nrlprof.tools.figures.anatomy import incomplete_note
from nrlprof.tools.figures.empty_gpu import no_kernel_notes
from nrlprof.tools.figures.file_set import FileSetFigures, read_file_set
from nrlprof.tools.figures.gpu_time import StepGpu
from nrlprof.tools.figures.memory import MemoryReading
from nrlprof.tools.figures.model import TOP, OpStat, Span, Summary, WorkerSummary
from nrlprof.tools.figures.nsys_capture import NsysCapture
from nrlprof.tools.figures.sections import anatomy_run, anatomy_section, anatomy_tables_of, memory_section
from nrlprof.tools.figures.stragglers import stragglers
from nrlprof.tools.figures.trace_stats import TraceStats
from nrlprof.tools.read.anatomy import ProfiledProcess
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.manifests import manifest_processes, manifest_view
from nrlprof.tools.read.nsys_export import export_stem

Item = TypeVar("Item")
NOTHING_FOUND = "no torch trace or Nsight Systems report found (nor memory or step-anatomy files)"
UNREAD_REPORT = (
    "nsys not found to export this report (install Nsight Systems, or put its `nsys export --type sqlite` beside it)"
)


def summarize(
    directory: Path, nsys: str | None = None, progress: Any = None, jobs: int | None = None, anatomy_view: bool = True
) -> Summary:
    """Summarise every torch trace and Nsight Systems report under `directory`.

    Unreadable traces are listed in `Summary.skipped` (every one may be); a missing directory, or one with
    nothing to summarise, readable or not, raises ToolError. `nsys` is the nsys executable (default: found on
    PATH). `jobs`: processes reading traces at once (default: trace_pool.default_jobs). `anatomy_view`: False
    keeps the step anatomy as tables only (`explain`), not in the summary's sections.
    """
    directory = Path(directory)
    found = find_inputs([directory])  # the one walk of the directory
    anatomy = anatomy_run(directory, found) if directory.is_dir() else None
    figures = read_file_set(found, nsys, progress, jobs)
    if not figures.inputs and anatomy is None:
        raise ToolError(NOTHING_FOUND, directory)
    return assemble(directory, [figures], anatomy, anatomy_view=anatomy_view)


def assemble(
    directory: Path | str,
    parts: list[FileSetFigures],
    anatomy: Path | None = None,
    order: Callable[[Path], Any] | None = None,
    anatomy_view: bool = True,
) -> Summary:
    """One summary of the figures of several sets of files (or of one), as if all were read in one walk.

    `anatomy`: the step-anatomy run to add, its workers named as their profiler files name them.
    `order`: the key that puts paths in the order of that walk (default: the paths themselves); items of a
    kind are taken in that order, as `summarize` takes them from one directory.
    """
    key = order or (lambda path: path)

    def ordered(items: Iterable[Item], path_of: Callable[[Item], Path]) -> list[Item]:
        return sorted(items, key=lambda item: key(path_of(item)))

    memory = MemoryReading(
        ordered((f for p in parts for f in p.memory.files), lambda f: f.path),
        ordered((s for p in parts for s in p.memory.skipped), lambda s: s[0]),
        ordered((e for p in parts for e in p.memory.snapshots), lambda e: e["path"]),
    )
    tables = anatomy_tables_of(anatomy, profiled_processes(parts))
    sections = {"memory": memory_section(memory), "anatomy": anatomy_section(tables) if anatomy_view else None}
    summary = Summary(
        directory,
        skipped=ordered((u for p in parts for u in p.unreadable), lambda u: u[0]),
        sections={name: section for name, section in sections.items() if section is not None},
        anatomy_tables=tables,
    )
    if tables is not None and tables.calls.bad_lines:
        summary.notes.append(
            f"step anatomy: {tables.calls.bad_lines} unreadable line(s) in {tables.calls.run} left out"
        )
    memory_skipped = summary.sections.get("memory", {}).get("skipped", [])
    summary.skipped.extend((Path(s["path"]), s["reason"]) for s in memory_skipped)
    traces = ordered((t for p in parts for t in p.traces), lambda t: t[0].path)
    stats: list[TraceStats] = []
    for header, outcome in sorted(traces, key=lambda t: t[0].sort_key()):
        if isinstance(outcome, TraceStats):
            stats.append(outcome)
        else:
            summary.skipped.append((header.path, outcome))
    summary.workers = combine(stats)
    summary.notes.extend(no_kernel_notes(stats))
    summary.nsys_reports = ordered((r for p in parts for r in p.nsys_reports), lambda r: r.path)
    without_nsys = sum(p.reports_without_nsys for p in parts)
    if without_nsys:
        summary.notes.append(f"nsys not found: install Nsight Systems to summarise {without_nsys} report(s)")
    manifests = manifest_view(
        ordered((m for p in parts for m in p.manifests), lambda m: m.path), set().union(*(p.names for p in parts))
    )
    captures = sorted((c for p in parts for c in p.captures), key=lambda c: (c.from_report, key(c.path)))
    summary.workers.extend(capture_summary(c, manifests.rank_of_file) for c in captures)
    notes = sorted((n for p in parts for n in p.capture_notes), key=lambda n: (n.from_report, key(n.path)))
    summary.notes.extend(str(n) for n in notes if not n.from_report)  # a .sqlite that is no export: no input
    summary.skipped.extend((n.path, n.reason) for n in notes if n.from_report)
    unread = ordered((r for p in parts for r in p.unread_reports), lambda r: r)
    summary.skipped.extend((r, UNREAD_REPORT) for r in unread)
    summary.notes.extend(manifests.notes)
    if anatomy_note := incomplete_note(summary.sections.get("anatomy", {})):
        summary.notes.append(anatomy_note)
    summary.skipped.extend(manifests.unreadable)
    summary.overhead = manifests.overhead
    summary.caught = manifests.caught
    summary.stragglers = stragglers(summary.workers)
    return summary


def profiled_processes(parts: list[FileSetFigures]) -> dict[int, tuple[str, int | None]]:
    """pid -> (worker, rank) of the processes that wrote the profiler files read (read.anatomy.profiled_names)."""
    from nrlprof.tools.read.anatomy import profiled_names

    found: list[ProfiledProcess] = []
    for part in parts:
        found += [header.process for header, _ in part.traces]
        found += manifest_processes(part.manifests)
        found += [(None, c.pid, c.worker, None) for c in part.captures]
    return profiled_names(found)


def capture_summary(capture: NsysCapture, rank_of_file: dict[str, int]) -> WorkerSummary:
    """An Nsight Systems capture as a worker entry: steps from NVTX, GPU figures from its export."""
    stem = export_stem(capture.path)
    rank = next((r for name, r in rank_of_file.items() if export_stem(Path(name)) == stem), None)
    summary = WorkerSummary(capture.worker, rank, files=[capture.path], source="nsys")
    for start, end, step in capture.steps:
        summary.step_wall_ms[step] = summary.step_wall_ms.get(step, 0.0) + (end - start) / 1000
        summary.steps.append(Span(str(step), start, end))
    summary.step_gpu = capture.step_gpu
    windows = sorted((lo, hi, step) for lo, hi, step in capture.steps)
    for name, start, end in capture.ranges:
        label, named_step = range_label(name)
        step = next((s for lo, hi, s in windows if lo <= start <= hi), named_step)
        per_step = summary.ranges_ms.setdefault(label, {})
        per_step[step] = per_step.get(step, 0.0) + (end - start) / 1000
        summary.range_calls[label] = summary.range_calls.get(label, 0) + 1
        summary.ranges.append(Span(name, start, end))
    kernels = [OpStat(name, calls, total, total) for name, (calls, total) in capture.kernels.items()]
    summary.kernels = sorted(kernels, key=lambda s: -s.total_us)[:TOP]
    summary.gpu_spans = [Span(name, start, end) for start, end, name in capture.gpu_spans]
    return summary


def combine(stats: list[TraceStats]) -> list[WorkerSummary]:
    """Trace statistics grouped per (worker, rank), in the order the traces were given."""
    groups: dict[tuple[str, int | None], WorkerSummary] = {}
    ops: dict[tuple[str, int | None], dict[str, OpStat]] = defaultdict(dict)
    kernels: dict[tuple[str, int | None], dict[str, OpStat]] = defaultdict(dict)
    for item in stats:
        header = item.header
        key = header.process[2:]  # (worker, rank)
        summary = groups.get(key) or groups.setdefault(key, WorkerSummary(*key))
        if header.host not in summary.hosts:
            summary.hosts.append(header.host)
        summary.files.append(header.path)
        for step, us in item.step_wall_us.items():
            summary.step_wall_ms[step] = summary.step_wall_ms.get(step, 0.0) + us / 1000
        for label, per_step in item.ranges_us.items():
            target = summary.ranges_ms.setdefault(label, {})
            for step, us in per_step.items():
                target[step] = target.get(step, 0.0) + us / 1000
        for label, calls in item.range_calls.items():
            summary.range_calls[label] = summary.range_calls.get(label, 0) + calls
        _add_stats(ops[key], item.ops)
        _add_stats(kernels[key], item.kernels)
        summary.steps.extend(item.steps)
        summary.ranges.extend(item.ranges)
        summary.gpu_spans.extend(item.gpu_spans)
        for step, figures in item.step_gpu.items():
            summary.step_gpu.setdefault(step, StepGpu()).add(figures)
        for step, (union, exposed) in item.step_cpu_comm.items():
            had = summary.step_cpu_comm.get(step, (0.0, 0.0))
            summary.step_cpu_comm[step] = (had[0] + union, had[1] + exposed)
    for key, summary in groups.items():
        summary.ops = sorted(ops[key].values(), key=lambda s: -s.self_us)[:TOP]
        summary.kernels = sorted(kernels[key].values(), key=lambda s: -s.total_us)[:TOP]
    return list(groups.values())


def _add_stats(into: dict[str, OpStat], stats: dict[str, OpStat]) -> None:
    for name, stat in stats.items():
        total = into.get(name) or into.setdefault(name, OpStat(name))
        total.calls += stat.calls
        total.total_us += stat.total_us
        total.self_us += stat.self_us
