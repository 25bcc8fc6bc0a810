"""The step anatomy as an inline SVG: one swimlane per worker group, steps side by side on one time axis."""

from __future__ import annotations

from html import escape

LANE_HEIGHT = 22
LABEL_WIDTH = 230
PLOT_WIDTH = 900
COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def anatomy_svg(model: dict) -> str:
    """Phases as bars in their worker group's lane; dashed lines at step starts; hover text per phase."""
    steps = sorted(model.get("steps", {}).items(), key=lambda item: int(item[0]))
    if not steps:
        return ""
    offsets, elapsed = {}, 0.0
    for step, figures in steps:
        offsets[step] = elapsed
        elapsed += float(figures.get("wall_ms") or 0.0)
    groups = sorted({p["worker"] for _, figures in steps for p in figures.get("phases", [])})
    if not groups or elapsed <= 0:
        return ""
    scale = PLOT_WIDTH / elapsed
    methods = sorted({p["method"] for _, figures in steps for p in figures.get("phases", [])})
    color = {method: COLORS[i % len(COLORS)] for i, method in enumerate(methods)}
    height = LANE_HEIGHT * (len(groups) + 1)
    parts = [f'<svg class="anatomy" width="{LABEL_WIDTH + PLOT_WIDTH + 10}" height="{height}" role="img">']
    for row, group in enumerate(groups):
        y = LANE_HEIGHT * (row + 1)
        parts.append(f'<text x="4" y="{y - 6}" font-size="12" data-lane="{escape(group)}">{escape(group)}</text>')
    for step, figures in steps:
        x = LABEL_WIDTH + offsets[step] * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" stroke="#888" stroke-dasharray="3,3" '
            f'data-step="{escape(step)}"/>'
            f'<text x="{x + 2:.1f}" y="{height - 4}" font-size="10">step {escape(step)}</text>'
        )
        for phase in figures.get("phases", []):
            row = groups.index(phase["worker"])
            left = LABEL_WIDTH + (offsets[step] + float(phase["start_ms"])) * scale
            width = max(1.0, float(phase["dur_ms"]) * scale)
            title = (
                f"step {step}: {phase['worker']}.{phase['method']} {float(phase['dur_ms']):.1f} ms, "
                f"{phase.get('calls', '?')} call(s), slowest rank {phase.get('slowest_rank')}"
            )
            parts.append(
                f'<rect x="{left:.1f}" y="{LANE_HEIGHT * row + 4}" width="{width:.1f}" height="{LANE_HEIGHT - 8}" '
                f'fill="{color[phase["method"]]}" data-worker="{escape(phase["worker"])}" data-step="{escape(step)}">'
                f"<title>{escape(title)}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)
