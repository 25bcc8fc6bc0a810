"""A summary as rich tables on a terminal. Every name from a trace or report is escaped: `[` is not markup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from nrlprof.tools.summary import TOP

if TYPE_CHECKING:
    from rich.console import Console

    from nrlprof.tools.nsys_stats import NsysReport
    from nrlprof.tools.summary import Summary


def terminal(stderr: bool = False) -> Console:
    """A rich console that leaves `:name:` alone (no emoji codes) and adds no colours of its own to text."""
    from rich.console import Console

    return Console(stderr=stderr, emoji=False, highlight=False)


def plain(value: object) -> str:
    """`value` as text that rich prints as is."""
    return escape(str(value))


def render_summary(summary: Summary, console: Console | None = None) -> None:
    """Step wall time, annotated ranges, top operators and kernels per worker; nsys tables; skips and notes."""
    from rich.table import Table

    console = console or terminal()
    steps = summary.steps
    if summary.workers:
        table = Table(title="Step wall time (ms)")
        table.add_column("worker")
        for step in steps:
            table.add_column(str(step), justify="right")
        for w in summary.workers:
            table.add_row(plain(w.label), *[_ms(w.step_wall_ms.get(step)) for step in steps])
        console.print(table)
        outside = any(None in per for w in summary.workers for per in w.ranges_ms.values())
        columns: list[int | None] = [*steps, None] if outside else list(steps)
        title = "Annotated ranges (ms per step" + ("; '-' = outside any profiled step)" if outside else ")")
        table = Table(title=title)
        table.add_column("worker")
        table.add_column("range")
        table.add_column("calls", justify="right")
        for step in columns:
            table.add_column(str(step) if step is not None else "-", justify="right")
        for w in summary.workers:
            for label, per_step in sorted(w.ranges_ms.items()):
                calls = str(w.range_calls.get(label, 0))
                table.add_row(plain(w.label), plain(label), calls, *[_ms(per_step.get(s)) for s in columns])
        if table.row_count:
            console.print(table)
        for title, attr in (("Top operators (by self time)", "ops"), ("Top kernels (by total time)", "kernels")):
            table = Table(title=title)
            for name, justify in (("worker", "left"), ("name", "left"), ("calls", "right"), ("self ms", "right"),
                                  ("total ms", "right")):  # fmt: skip
                table.add_column(name, justify=justify, overflow="fold")
            for w in summary.workers:
                for op in getattr(w, attr):
                    table.add_row(plain(w.label), plain(op.name), str(op.calls), _ms(op.self_us / 1000),
                                  _ms(op.total_us / 1000))  # fmt: skip
            if table.row_count:
                console.print(table)
    for report in summary.nsys_reports:
        _render_nsys(report, console)
    for path, reason in summary.skipped:
        console.print(f"[yellow]skipped[/] {plain(path)}: {plain(reason)}", soft_wrap=True)
    for note in summary.notes:
        console.print(f"[yellow]note:[/] {plain(note)}", soft_wrap=True)


def _render_nsys(report: NsysReport, console: Any) -> None:
    from rich.table import Table

    if report.error:
        console.print(f"[red]{plain(report.path)}[/]: {plain(report.error)}")
        return
    for title, rows, key in (("kernels", report.kernels, "Name"), ("NVTX ranges", report.nvtx, "Range")):
        if not rows:
            continue
        table = Table(title=plain(f"{report.path.name}: {title}"))
        columns = [c for c in rows[0] if c in (key, "Instances") or c.startswith(("Time", "Total Time"))]
        for column in columns:
            table.add_column(plain(column), overflow="fold")
        for row in rows[:TOP]:
            table.add_row(*[plain(row.get(c, "")) for c in columns])
        console.print(table)


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"
