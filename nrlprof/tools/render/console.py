"""A summary, or two runs compared, as rich tables. Names from traces are escaped: `[` is no markup.

One worker's summary fits a screen: tables have a bounded number of rows and, on a terminal, names are cut to
NAME_WIDTH (kernels by their short name); `summary --json` has everything in full. On a terminal a table fits
its width, the name columns wrapping so that no column is lost; written to a file or a pipe, every table is
printed at its full width, names whole, whatever the terminal's (`print_table`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from nrlprof.tools.figures.kernel_names import short_kernel_name
from nrlprof.tools.figures.model import TOP
from nrlprof.tools.render.text import sections_text, step_lines, truncate

if TYPE_CHECKING:
    from rich.console import Console

    from nrlprof.tools.figures.model import Summary
    from nrlprof.tools.read.nsys_stats import NsysReport

NAME_WIDTH = 48
MAX_ROWS = 40  # per table
UNBOUNDED_WIDTH = 100_000  # a table measured for a file or a pipe: as wide as its content
GPU_COLUMNS = (("wall", None), ("kernels", "gpu_kernel_ms"), ("busy %", "gpu_busy_pct"), ("idle", "gpu_idle_ms"),
               ("comm", "comm_ms"), ("memcpy", "memcpy_ms"))  # fmt: skip


def terminal(stderr: bool = False) -> Console:
    """A rich console that leaves `:name:` alone (no emoji codes) and adds no colours of its own to text."""
    from rich.console import Console

    return Console(stderr=stderr, emoji=False, highlight=False)


def print_table(console: Console, table: Any) -> None:
    """`table` fitted to a terminal; at its full width when the output is a file or a pipe (no column cut)."""
    if console.is_terminal:
        console.print(table)
        return
    width = console.width
    needed = console.measure(table, options=console.options.update_width(UNBOUNDED_WIDTH)).maximum
    console.width = max(width, needed)  # rich caps a print's width at the console's
    try:
        console.print(table)
    finally:
        console.width = width


def print_rows(console: Console, columns: tuple[str, ...], rows: list[tuple], title: str | None = None) -> None:
    """A table of `columns` and `rows`, each cell printed as it is (`plain`), fitted as `print_table` fits it."""
    from rich.table import Table

    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*map(plain, row))
    print_table(console, table)


def plain(value: object) -> str:
    """`value` as text that rich prints as is."""
    return escape(str(value))


def name(value: object, console: Console | None = None) -> str:
    """A name from a trace, escaped; cut to NAME_WIDTH on a terminal (whole in a file or a pipe)."""
    text = str(value)
    return plain(truncate(text, NAME_WIDTH) if console is None or console.is_terminal else text)


def render_summary(summary: Summary, console: Console | None = None) -> None:
    """Per-step time and GPU figures, the slowest rank per step, ranges, top operators and kernels, overhead."""
    console = console or terminal()
    if summary.workers:
        _step_table(summary, console)
        lines = step_lines(summary)
        if any(len(rows) for rows in lines):
            console.print("[bold]Slowest rank per step[/] (wall time over the median rank's)")
            for line in lines:
                console.print(plain(line), soft_wrap=True)
        _ranges_table(summary, console)
        _top_tables(summary, console)
    _overhead_table(summary, console)
    if summary.caught:
        console.print("[bold]Slow steps caught[/] (windows that opened by themselves, or slow steps' kept traces)")
        for caught in summary.caught:
            console.print(plain(caught.describe(summary.anatomy_steps)), soft_wrap=True)
    _hta_table(summary, console)
    if summary.sections:
        console.print(plain(sections_text(summary.sections)), soft_wrap=True)
    for report in summary.nsys_reports:
        _render_nsys(report, console)
    for path, reason in summary.skipped:
        console.print(f"[yellow]skipped[/] {plain(path)}: {plain(reason)}", soft_wrap=True)
    for note in summary.notes:
        console.print(f"[yellow]note:[/] {plain(note)}", soft_wrap=True)
    from nrlprof.tools.advice.explain import explain
    from nrlprof.tools.advice.phases import phase_map
    from nrlprof.tools.render.explain_text import top_lines

    for line in top_lines(explain(summary, phase_map())):
        console.print(plain(line), soft_wrap=True)


def _table(title: str, columns: list[tuple[str, str]]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column, justify in columns:
        if justify == "right":  # figures: never cut; names wrap first where the terminal is narrow
            table.add_column(column, justify=justify, no_wrap=True, min_width=len(column))
        else:
            table.add_column(column, justify=justify, overflow="fold", min_width=min(len(column), 12))
    return table


def _print(table: Any, rows: list[list[str]], console: Console) -> None:
    for row in rows[:MAX_ROWS]:
        table.add_row(*row)
    if rows:
        print_table(console, table)
    if len(rows) > MAX_ROWS:
        console.print(f"... {len(rows) - MAX_ROWS} more row(s) in `nrlprof summary --json`")


def _step_table(summary: Summary, console: Console) -> None:
    gpu = any(w.step_gpu for w in summary.workers)
    columns = GPU_COLUMNS if gpu else GPU_COLUMNS[:1]
    title = "Time per step (ms" + ("; GPU kernels, busy share, idle, NCCL, memcpy/memset)" if gpu else ")")
    table = _table(title,
                   [("worker", "left"), ("step", "right"), *[(c, "right") for c, _ in columns]])  # fmt: skip
    rows = []
    for w in summary.workers:
        for step, wall in sorted(w.step_wall_ms.items()):
            figures = w.step_gpu[step].to_json() if step in w.step_gpu else {}
            cells = [_ms(wall), *[_ms(figures.get(key)) for _, key in columns[1:]]]
            rows.append([name(w.label, console), str(step), *cells])
    _print(table, rows, console)


def _ranges_table(summary: Summary, console: Console) -> None:
    steps = summary.steps
    outside = any(None in per for w in summary.workers for per in w.ranges_ms.values())
    columns: list[int | None] = [*steps, None] if outside else list(steps)
    title = "Annotated ranges (ms per step" + ("; '-' = outside any profiled step)" if outside else ")")
    table = _table(title, [("range", "left"), ("worker", "left"), ("calls", "right"),
                           *[(str(s) if s is not None else "-", "right") for s in columns]])  # fmt: skip
    found = [(label, index, w, per_step) for index, w in enumerate(summary.workers)
             for label, per_step in w.ranges_ms.items()]  # fmt: skip
    rows = [
        [
            name(label, console),
            name(w.label, console),
            str(w.range_calls.get(label, 0)),
            *[_ms(per_step.get(s)) for s in columns],
        ]
        for label, _, w, per_step in sorted(found, key=lambda item: item[:2])  # grouped by label
    ]
    _print(table, rows, console)


def _top_tables(summary: Summary, console: Console) -> None:
    head = [("worker", "left"), ("name", "left"), ("calls", "right")]
    table = _table("Top operators (by self time)", [*head, ("self ms", "right"), ("total ms", "right")])
    rows = [[name(w.label, console), name(op.name, console), str(op.calls), _ms(op.self_us / 1000),
             _ms(op.total_us / 1000)]
            for w in summary.workers for op in w.ops]  # fmt: skip
    _print(table, rows, console)
    table = _table("Top kernels (by total time; full names in --json)", [*head, ("total ms", "right")])
    rows = [[name(w.label, console), name(short_kernel_name(k.name), console), str(k.calls),
             _ms(k.total_us / 1000)]
            for w in summary.workers for k in w.kernels]  # fmt: skip
    _print(table, rows, console)


def _overhead_table(summary: Summary, console: Console) -> None:
    table = _table("Profiler overhead (starting / stopping the profiler, not the workload; finishing its files "
                   "beside the next step)",
                   [("worker", "left"), ("window", "left"), ("backend", "left"), ("status", "left"), ("host", "left"),
                    ("pid", "right"), ("start ms", "right"), ("stop ms", "right"), ("finish ms", "right")])  # fmt: skip
    rows = [[name(o.label, console), plain(o.window + (" (asked for)" if o.asked else "")), plain(o.backend),
             plain(o.status), name(o.host, console), str(o.pid), _ms(o.start_ms), _ms(o.stop_ms),
             _ms(o.finish_ms)]
            for o in summary.overhead]  # fmt: skip
    _print(table, rows, console)


def _hta_table(summary: Summary, console: Console) -> None:
    columns = (("idle %", "idle_pct"), ("compute %", "compute_pct"), ("non-compute %", "non_compute_pct"),
               ("comm/compute overlap %", "comm_comp_overlap_pct"))  # fmt: skip
    table = _table("HolisticTraceAnalysis, whole window per rank", [("worker", "left"), ("window", "left"),
                   ("rank", "right"), *[(c, "right") for c, _ in columns]])  # fmt: skip
    rows = [[name(r["worker"], console), plain(r["window"]), str(r["rank"]), *[_ms(r.get(k)) for _, k in columns]]
            for r in summary.hta or []]  # fmt: skip
    _print(table, rows, console)


def _render_nsys(report: NsysReport, console: Any) -> None:
    if report.error:
        console.print(f"[red]{plain(report.path)}[/]: {plain(report.error)}", soft_wrap=True)
        return
    for title, rows, key in (("kernels", report.kernels, "Name"), ("NVTX ranges", report.nvtx, "Range")):
        if not rows:
            continue
        columns = [c for c in rows[0] if c in (key, "Instances") or c.startswith(("Time", "Total Time"))]
        table = _table(plain(f"{report.path.name}: {title}"), [(plain(c), "left") for c in columns])
        cells = [[name(short_kernel_name(row.get(c, "")) if c == "Name" else row.get(c, ""), console)
                  for c in columns] for row in rows[:TOP]]  # fmt: skip
        _print(table, cells, console)


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.1f}" if abs(value) >= 100 or value == 0 else f"{value:.3g}"


def render_diff(result: dict[str, Any], console: Any = None) -> None:
    """One table row per worker x step x figure: A, B, the change and the change in percent."""
    from rich.table import Table

    console = console or terminal()
    table = Table(title=f"A = {plain(result['a'])}, B = {plain(result['b'])}")
    table.add_column("worker", no_wrap=True, overflow="ellipsis")
    for column in ("step", "figure", "A", "B", "change", "%"):
        table.add_column(column, justify="left" if column == "figure" else "right", no_wrap=True)
    for row in result["rows"]:
        who = row["worker"] if row["rank"] is None else f"{row['worker']} rank {row['rank']}"
        for key, figure in row["figures"].items():
            pct = f"{figure['change_pct']:+.1f}%" if figure["change_pct"] is not None else ""
            table.add_row(name(who, console), str(row["step"]), _label(key), f"{figure['a']:.4g}",
                          f"{figure['b']:.4g}", f"{figure['change']:+.4g}", pct)  # fmt: skip
    if result["rows"]:
        print_table(console, table)
    if "anatomy" in result:
        from nrlprof.tools.render.anatomy_text import anatomy_diff_lines

        console.print("[bold]Step anatomy[/]")
        for line in anatomy_diff_lines(result["anatomy"]):
            console.print(plain(line), soft_wrap=True)
    if "memory" in result:
        console.print(f"[bold]Memory[/]: {len(result['memory']['rows'])} worker x step row(s) compared (see --json)")
    for side in ("a", "b"):
        for item in result[f"only_in_{side}"]:
            console.print(f"only in {side.upper()}: {plain(item['worker'])} rank {item['rank']} step {item['step']}")


def _label(name: str) -> str:
    return name.removesuffix("_ms").removesuffix("_pct").replace("_", " ") + (" ms" if name.endswith("_ms") else " %")
