"""The HTML report's page: a timeline picture (inline SVG) and the summary tables, every value escaped.

No network: the CSS is inline and the picture is SVG with native tooltips (`<title>`); no script.
The timeline has one lane per worker rank: its step bars and annotated ranges (CPU), and under them a GPU
lane of its longest kernels, copies and memsets (blue: compute, red: NCCL, green: memcpy/memset; full
kernel names as hover text). All lanes share one clock, so step boundaries line up across workers. Time
runs left to right over the profiled step windows only: windows far apart are drawn side by side with a
gap, so steps 3-4 and 10 both stay readable. The profiler's own start and stop (from the manifests) are
grey flags at the edges of each window: overhead, not workload.
"""

from __future__ import annotations

import bisect
import html
import time
from dataclasses import dataclass

from nrlprof.layout import range_label
from nrlprof.tools.advice.explain import Explanation, explain
from nrlprof.tools.advice.phases import phase_map
from nrlprof.tools.figures.gpu_time import is_comm
from nrlprof.tools.figures.kernel_names import short_kernel_name
from nrlprof.tools.figures.model import TOP, Span, Summary, WorkerSummary
from nrlprof.tools.read.manifests import Overhead
from nrlprof.tools.render.explain_text import finding_lines
from nrlprof.tools.render.text import step_lines, truncate

WIDTH = 1160
LABEL_WIDTH = 270
LANE_LABEL_CHARS = 38
LANE = 60
CPU_LANE = 44
GPU_BAR = 12
AXIS = 34
GAP = 18
MIN_SEGMENT = 48
BAR = 6
MAX_DEPTH = 3
NAME_WIDTH = 80
GPU_KEYS = ("gpu_kernel_ms", "gpu_busy_pct", "gpu_idle_ms", "comm_ms", "memcpy_ms")
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2",
           "#ca8a04", "#db2777", "#4f46e5", "#65a30d", "#0d9488", "#b91c1c")  # fmt: skip
STEP_FILLS = ("#dbeafe", "#fef3c7")
GPU_FILLS = {"compute": "#1d4ed8", "comm": "#dc2626", "copy": "#16a34a"}
OVERHEAD_FILL = "#6b7280"

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #111827; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #4b5563; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 4px 0 12px; }
th, td { border: 1px solid #d1d5db; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f3f4f6; } td.l, th.l { text-align: left; white-space: normal; max-width: 520px;
  overflow-wrap: anywhere; }
.straggler { font-family: ui-monospace, monospace; margin: 2px 0; }
tr:nth-child(even) td { background: #f9fafb; }
.note { color: #92400e; background: #fffbeb; border: 1px solid #fcd34d; padding: 6px 10px; margin: 6px 0; }
.legend span { display: inline-block; margin: 0 14px 4px 0; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 5px; vertical-align: -1px; }
svg text { font: 11px system-ui, sans-serif; }
"""


def render_html(summary: Summary, explanation: Explanation | None = None) -> str:
    """The page; it opens with `explain`'s findings (made here from the summary unless given)."""
    if explanation is None:
        explanation = explain(summary, phase_map())
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>nrlprof report: {_e(summary.directory)}</title><style>{CSS}</style></head><body>",
        "<h1>nrlprof profiling report</h1>",
        f'<p class="meta">{_e(summary.directory)} &middot; {len(summary.workers)} worker rank(s), '
        f"steps {_e(', '.join(map(str, summary.steps)) or 'none')} &middot; "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}</p>",
    ]
    parts += _findings(explanation)
    if summary.caught:
        parts.append('<h2 id="caught">Slow steps caught (windows that opened by themselves, kept traces)</h2><ul>')
        parts += [f"<li>{_e(c.describe(summary.anatomy_steps))}</li>" for c in summary.caught]
        parts.append("</ul>")
    for path, reason in summary.skipped:
        parts.append(f'<div class="note">skipped {_e(path)}: {_e(reason)}</div>')
    for note in summary.notes:
        parts.append(f'<div class="note">{_e(note)}</div>')
    if summary.workers:
        parts += ["<h2>Timeline</h2>", timeline_svg(summary.workers, summary.overhead), _legend(summary.workers)]
        parts += _tables(summary)
    parts += _overhead_tables(summary)
    parts += _section_lanes(summary)
    parts += _nsys_tables(summary)
    parts.append("</body></html>")
    return "\n".join(parts)


@dataclass
class _Segment:
    start: float
    end: float
    x: float = 0.0
    width: float = 0.0


class _Axis:
    """Maps time (µs) to x over the step windows, laid side by side."""

    def __init__(self, spans: list[Span], left: float, width: float) -> None:
        segments: list[_Segment] = []
        for span in sorted(spans, key=lambda s: s.start_us):
            # Steps of one window follow each other closely: a gap under half a step joins them.
            joins = max(span.end_us - span.start_us, segments[-1].end - segments[-1].start) / 2 if segments else 0
            if segments and span.start_us <= segments[-1].end + joins:
                segments[-1].end = max(segments[-1].end, span.end_us)
            else:
                segments.append(_Segment(span.start_us, span.end_us))
        for seg in segments:
            pad = max((seg.end - seg.start) * 0.02, 1.0)
            seg.start, seg.end = seg.start - pad, seg.end + pad
        usable = width - GAP * (len(segments) - 1)
        total = sum(s.end - s.start for s in segments) or 1.0
        widths = [max(MIN_SEGMENT, usable * (s.end - s.start) / total) for s in segments]
        scale = usable / sum(widths) if widths else 1.0
        x = left
        for seg, w in zip(segments, widths, strict=True):
            seg.x, seg.width = x, w * scale
            x += seg.width + GAP
        self.segments = segments
        self._starts = [s.start for s in segments]

    def clip(self, start: float, end: float) -> tuple[float, float] | None:
        """x from and to of the part of [start, end] in the window that holds `start`."""
        i = bisect.bisect_right(self._starts, start) - 1
        if i < 0 or start > self.segments[i].end:
            return None
        seg = self.segments[i]
        k = seg.width / (seg.end - seg.start)
        return seg.x + (start - seg.start) * k, seg.x + (min(end, seg.end) - seg.start) * k


def _findings(explanation: Explanation) -> list[str]:
    """What holds the steps back, most first (`nrlprof explain`), and what the data cannot tell."""
    parts = ['<h2 id="findings">What holds the steps back</h2>']
    shown = explanation.shown()
    if not shown:
        parts.append('<p class="meta">No finding above the thresholds: nothing stands out in what was read.</p>')
    items = []
    for finding in shown:
        lines = finding_lines(finding, 0)
        head = f"<b>{_e(finding.kind)}</b> ({finding.impact_pct:.0f}%): {_e(finding.summary)}"
        rest = "".join(f"<br><small>{_e(line.strip())}</small>" for line in lines[1:])
        items.append(f'<li class="finding">{head}{rest}</li>')
    if items:
        parts.append("<ol>" + "".join(items) + "</ol>")
    if explanation.cannot_tell:
        said = "".join(f"<li>{_e(sentence)}</li>" for sentence in explanation.cannot_tell)
        parts.append(f'<p class="meta">What the data cannot tell:</p><ul class="meta">{said}</ul>')
    return parts


def range_colors(workers: list[WorkerSummary]) -> dict[str, str]:
    """One colour per range label, whatever step it ran in (`<label> [step n]`): the palette in label order, so
    labels differ in colour up to the palette's size."""
    labels = sorted({range_label(s.label)[0] for w in workers for s in w.ranges})
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def timeline_svg(workers: list[WorkerSummary], overhead: list[Overhead] | None = None) -> str:
    spans = [s for w in workers for s in w.steps] or [s for w in workers for s in w.ranges]
    height = AXIS + LANE * len(workers) + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="timeline">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>']  # fmt: skip
    if not spans:
        out.append('<text x="10" y="20">no step or range recorded</text></svg>')
        return "\n".join(out)
    axis = _Axis(spans, LABEL_WIDTH, WIDTH - LABEL_WIDTH - 10)
    colors = range_colors(workers)
    origin = axis.segments[0].start
    for seg in axis.segments:
        out.append(f'<line x1="{seg.x:.1f}" y1="{AXIS - 4}" x2="{seg.x + seg.width:.1f}" y2="{AXIS - 4}" '
                   'stroke="#6b7280"/>')  # fmt: skip
        if seg.width < 2 * MIN_SEGMENT:
            continue
        out.append(f'<text x="{seg.x:.1f}" y="{AXIS - 20}">+{(seg.start - origin) / 1e6:.3f} s</text>')
        out.append(
            f'<text x="{seg.x + seg.width:.1f}" y="{AXIS - 8}" text-anchor="end">'
            f"{(seg.end - seg.start) / 1000:.1f} ms</text>"
        )
    for row, worker in enumerate(workers):
        y = AXIS + row * LANE
        fill = "#f9fafb" if row % 2 else "#f3f4f6"
        out.append(f'<rect x="0" y="{y}" width="{WIDTH}" height="{LANE}" fill="{fill}"/>')
        out.append(f'<text x="6" y="{y + LANE / 2 + 4}">{_e(truncate(worker.label, LANE_LABEL_CHARS))}</text>')
        for step in sorted(worker.steps, key=lambda s: s.start_us):
            box = axis.clip(step.start_us, step.end_us)
            if box is None:
                continue
            x0, x1 = box
            color = STEP_FILLS[int(step.label) % 2] if step.label.isdigit() else STEP_FILLS[0]
            out.append(f'<line x1="{x0:.1f}" y1="{y + 2}" x2="{x0:.1f}" y2="{y + LANE - 2}" stroke="#1e3a8a" '
                       'stroke-dasharray="2,2"/>')  # fmt: skip
            ms = (step.end_us - step.start_us) / 1000
            out.append(
                f"<g><title>{_e(worker.label)} step {_e(step.label)}: {ms:.1f} ms</title>"
                f'<rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 1):.1f}" height="{CPU_LANE - 4}" '
                f'fill="{color}" stroke="#93c5fd"/>'
                f'<text x="{x0 + 3:.1f}" y="{y + 13}" fill="#1e3a8a">{_e(step.label)}</text></g>'
            )
        out.extend(_range_bars(worker, axis, y, colors))
        out.extend(_gpu_lane(worker, axis, y + CPU_LANE))
        out.extend(_overhead_flags(worker, overhead or [], axis, y))
    out.append("</svg>")
    return "\n".join(out)


def _range_bars(worker: WorkerSummary, axis: _Axis, y: float, colors: dict[str, str]) -> list[str]:
    bars = []
    open_ends: list[float] = []
    for span in sorted(worker.ranges, key=lambda s: (s.start_us, -s.end_us)):
        while open_ends and open_ends[-1] <= span.start_us:
            open_ends.pop()
        depth = len(open_ends)
        open_ends.append(span.end_us)
        box = axis.clip(span.start_us, span.end_us)
        if box is None or depth > MAX_DEPTH:
            continue
        x0, x1 = box
        ms = (span.end_us - span.start_us) / 1000
        bars.append(
            f'<rect x="{x0:.1f}" y="{y + 16 + depth * (BAR + 1)}" width="{max(x1 - x0, 1):.1f}" height="{BAR}" '
            f'fill="{colors[range_label(span.label)[0]]}"><title>{_e(span.label)}: {ms:.2f} ms</title></rect>'
        )
    return bars


def _gpu_kind(name: str) -> str:
    if is_comm(name):
        return "comm"
    return "copy" if name in ("memcpy", "memset") or name.startswith(("Memcpy", "Memset")) else "compute"


def _gpu_lane(worker: WorkerSummary, axis: _Axis, y: float) -> list[str]:
    """The worker's longest GPU activities under its steps; hover text: the full kernel name and duration."""
    if not worker.gpu_spans:
        return []
    width = WIDTH - LABEL_WIDTH - 10
    out = [f'<text x="{LABEL_WIDTH - 8}" y="{y + GPU_BAR - 2}" text-anchor="end" fill="#374151">GPU</text>',
           f'<rect x="{LABEL_WIDTH}" y="{y}" width="{width}" height="{GPU_BAR}" fill="#e5e7eb"/>']  # fmt: skip
    for span in worker.gpu_spans:
        box = axis.clip(span.start_us, span.end_us)
        if box is None:
            continue
        x0, x1 = box
        us = span.end_us - span.start_us
        out.append(
            f'<rect class="gpu" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 0.8):.1f}" height="{GPU_BAR}" '
            f'fill="{GPU_FILLS[_gpu_kind(span.label)]}"><title>{_e(span.label)}: {us:,.1f} us</title></rect>'
        )
    return out


def _overhead_flags(worker: WorkerSummary, overhead: list[Overhead], axis: _Axis, y: float) -> list[str]:
    """Grey flags where this worker's profiler started (left of its window) and stopped (right of it)."""
    out = []
    for item in overhead:
        if (item.worker, item.rank) != (worker.worker, worker.rank):
            continue
        window = [s for s in worker.steps if item.started_at <= s.start_us / 1e6 <= item.stopped_at] or worker.steps
        if not window:
            continue
        first = axis.clip(min(s.start_us for s in window), min(s.end_us for s in window))
        last_span = max(window, key=lambda s: s.end_us)
        last = axis.clip(last_span.start_us, last_span.end_us)
        marks = ((first[0] if first else None, "start", item.start_ms, -1),
                 (last[1] if last else None, "stop", item.stop_ms, 1))  # fmt: skip
        for x, what, ms, side in marks:
            if x is None:
                continue
            tip = f"profiler {what} ({item.backend}, window {item.window}): {ms:,.1f} ms of overhead, not workload"
            points = f"{x:.1f},{y + 2} {x + 7 * side:.1f},{y + 7} {x:.1f},{y + 12}"
            out.append(f'<polygon class="overhead" points="{points}" fill="{OVERHEAD_FILL}"><title>{_e(tip)}</title>'
                       "</polygon>")  # fmt: skip
    return out


def _legend(workers: list[WorkerSummary]) -> str:
    items = [
        f'<span><i style="background:{color}"></i>{_e(label)}</span>' for label, color in range_colors(workers).items()
    ]
    if any(w.gpu_spans for w in workers):
        items += [f'<span><i style="background:{GPU_FILLS[k]}"></i>GPU {k}</span>' for k in GPU_FILLS]
    items.append(f'<span><i style="background:{OVERHEAD_FILL}"></i>profiler start/stop (overhead)</span>')
    return f'<div class="legend">{"".join(items)}</div>' if items else ""


def _tables(summary: Summary) -> list[str]:
    steps = summary.steps
    parts = ["<h2>Step wall time (ms)</h2>", _table(["worker", *map(str, steps)],
             [[w.label, *[_ms(w.step_wall_ms.get(s)) for s in steps]] for w in summary.workers])]  # fmt: skip
    gpu_rows = [
        [w.label, str(step), _fig(w.step_wall_ms.get(step)), *[_fig(f[k]) for k in GPU_KEYS]]
        for w in summary.workers
        for step, f in ((step, g.to_json()) for step, g in sorted(w.step_gpu.items()))
    ]
    if gpu_rows:
        head = ["worker", "step", "wall ms", "GPU kernels ms", "GPU busy %", "GPU idle ms", "NCCL ms", "memcpy ms"]
        parts += ["<h2>GPU per step</h2>", _table(head, gpu_rows)]
    lines = step_lines(summary)
    if lines:
        parts.append("<h2>Slowest rank per step</h2>")
        parts += [f'<p class="straggler">{_e(line)}</p>' for line in lines]
    outside = any(None in per for w in summary.workers for per in w.ranges_ms.values())
    columns: list[int | None] = [*steps, None] if outside else list(steps)
    found = [(label, index, w, per) for index, w in enumerate(summary.workers) for label, per in w.ranges_ms.items()]
    rows = [
        [label, w.label, str(w.range_calls.get(label, 0)), *[_ms(per.get(s)) for s in columns]]
        for label, _, w, per in sorted(found, key=lambda item: item[:2])  # grouped by label
    ]
    if rows:
        head = ["range", "worker", "calls", *[str(s) if s is not None else "outside steps" for s in columns]]
        parts += ["<h2>Annotated ranges (ms per step)</h2>", _table(head, rows, text_columns=2)]
    rows = [[w.label, op.name, str(op.calls), _ms(op.self_us / 1000), _ms(op.total_us / 1000)]
            for w in summary.workers for op in w.ops]  # fmt: skip
    if rows:
        head = ["worker", "name", "calls", "self ms", "total ms"]
        parts += ["<h2>Top operators (by self time)</h2>", _table(head, rows, text_columns=2)]
    rows = [[w.label, k.name, str(k.calls), _ms(k.total_us / 1000)] for w in summary.workers for k in w.kernels]
    if rows:
        head = ["worker", "kernel (hover: full name)", "calls", "total ms"]
        parts += ["<h2>Top kernels (by total time)</h2>", _table(head, rows, text_columns=2, names=(1,))]
    return parts


def _overhead_tables(summary: Summary) -> list[str]:
    if not summary.overhead:
        return []
    head = ["worker", "window", "backend", "status", "host", "pid", "start ms", "stop ms", "finish ms"]
    rows = [[o.label, o.window, o.backend, o.status, o.host, str(o.pid), _ms(o.start_ms), _ms(o.stop_ms),
             _ms(o.finish_ms)]
            for o in summary.overhead]  # fmt: skip
    title = (
        "Profiler overhead (time to start and stop the profiler in each process, not the workload; finish: its "
        "files finished beside the next step)"
    )
    return [f"<h2>{title}</h2>", _table(head, rows, text_columns=5)]


def _section_lanes(summary: Summary) -> list[str]:
    """The step anatomy's swimlanes and the memory lane, where the summary has them."""
    parts = []
    if "anatomy" in summary.sections:
        from nrlprof.tools.render.anatomy_svg import anatomy_svg

        parts += ["<h2>Step anatomy (every worker group, from Ray's task events)</h2>"]
        parts.append(anatomy_svg(summary.sections["anatomy"]))
    if "memory" in summary.sections:
        from nrlprof.tools.render.memory_svg import memory_lane_svg

        parts += ["<h2>Memory per step</h2>", memory_lane_svg(summary.sections["memory"])]
        parts += [f'<div class="note">{_e(finding)}</div>' for finding in summary.sections["memory"]["findings"]]
    return parts


def _nsys_tables(summary: Summary) -> list[str]:
    if not summary.nsys_reports:
        return []
    parts = ["<h2>Nsight Systems reports</h2>"]
    for report in summary.nsys_reports:
        parts.append(f"<h3>{_e(report.path.name)}</h3>")
        if report.error:
            parts.append(f'<div class="note">{_e(report.error)}</div>')
        for rows, key in ((report.kernels, "Name"), (report.nvtx, "Range")):
            if rows:
                columns = [c for c in rows[0] if c in (key, "Instances") or c.startswith(("Time", "Total Time"))]
                head = [columns[-1], *columns[:-1]] if columns and columns[-1] == key else columns
                cells = [[row.get(c, "") for c in head] for row in rows[:TOP]]
                parts.append(_table(head, cells, text_columns=1, names=(0,) if key == "Name" else ()))
    return parts


def _table(head: list[str], rows: list[list[str]], text_columns: int = 1, names: tuple[int, ...] = ()) -> str:
    """A table; the columns in `names` hold kernel names: shown short, the full name as hover text."""

    def cell(tag: str, i: int, value: str) -> str:
        if tag == "td" and i in names:
            short = truncate(short_kernel_name(value), NAME_WIDTH)
            return f'<td class="l" title="{_e(value)}">{_e(short)}</td>'
        return f'<{tag} class="l">{_e(value)}</{tag}>' if i < text_columns else f"<{tag}>{_e(value)}</{tag}>"

    def cells(tag: str, values: list[str]) -> str:
        return "".join(cell(tag, i, v) for i, v in enumerate(values))

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    return f"<table><thead><tr>{cells('th', head)}</tr></thead><tbody>{body}</tbody></table>"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"


def _fig(value: float | None) -> str:
    """Per-step figures: two decimals, kernels of tens of microseconds stay visible."""
    return "" if value is None else f"{value:,.2f}" if abs(value) < 100 else f"{value:,.1f}"


def _e(value: object) -> str:
    return html.escape(str(value))
