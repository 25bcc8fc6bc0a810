"""The HTML report's memory lane: per worker x rank, a small inline SVG of its host and CUDA figures per step."""

from __future__ import annotations

from html import escape
from typing import Any

WIDTH, HEIGHT, PAD_LEFT, PAD_RIGHT, PAD_Y = 420, 110, 56, 12, 16
SERIES = (
    ("host_rss_mb", "host RSS", "#1f77b4", ""),
    ("host_peak_mb", "host peak", "#1f77b4", "4 3"),
    ("cuda_allocated_mb", "CUDA allocated", "#d62728", ""),
    ("cuda_reserved_mb", "CUDA reserved", "#ff7f0e", ""),
    ("cuda_peak_mb", "CUDA peak", "#d62728", "4 3"),
)


def _chart(title: str, steps: list[tuple[int, dict[str, Any]]]) -> str:
    shown = [s for s in SERIES if any(isinstance(f.get(s[0]), (int, float)) for _, f in steps)]
    values = [f[name] for name, *_ in shown for _, f in steps if isinstance(f.get(name), (int, float))]
    top = max(values, default=0.0) or 1.0
    span = max(len(steps) - 1, 1)

    def x(index: int) -> float:
        return PAD_LEFT + (WIDTH - PAD_LEFT - PAD_RIGHT) * (index / span if len(steps) > 1 else 0.5)

    def y(value: float) -> float:
        return HEIGHT - PAD_Y - (HEIGHT - 2 * PAD_Y) * value / top

    parts = [
        f'<svg class="memory-lane" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)} memory per step">',
        f'<text x="{PAD_LEFT}" y="11" font-size="11">{escape(title)}</text>',
        f'<text x="{PAD_LEFT - 4}" y="{PAD_Y + 4}" font-size="9" text-anchor="end">{top:.0f} MB</text>',
        f'<text x="{PAD_LEFT - 4}" y="{HEIGHT - PAD_Y}" font-size="9" text-anchor="end">0</text>',
        f'<line x1="{PAD_LEFT}" y1="{HEIGHT - PAD_Y}" x2="{WIDTH - PAD_RIGHT}" y2="{HEIGHT - PAD_Y}" stroke="#999"/>',
    ]
    for index, (step, _) in enumerate(steps):
        parts.append(f'<text x="{x(index):.1f}" y="{HEIGHT - 3}" font-size="9" text-anchor="middle">{step}</text>')
    for name, label, colour, dash in shown:
        points = [(x(i), y(f[name]), step, f[name]) for i, (step, f) in enumerate(steps) if name in f]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in points)
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<polyline fill="none" stroke="{colour}"{dashing} points="{path}"><title>{label}</title></polyline>'
        )
        for px, py, step, value in points:
            parts.append(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2" fill="{colour}">'
                f"<title>step {step}: {label} {value:.1f} MB</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def memory_lane_svg(model: dict[str, Any]) -> str:
    """One inline SVG per worker x rank of the memory model (`memory_summary`), in a div; "" when there is none."""
    charts = []
    for worker, ranks in model.get("workers", {}).items():
        for rank, entry in ranks.items():
            steps = sorted(((int(s), f) for s, f in entry.get("steps", {}).items()), key=lambda item: item[0])
            if steps:
                charts.append(_chart(worker if rank == "-" else f"{worker} rank {rank}", steps))
    if not charts:
        return ""
    legend = " ".join(
        f'<span style="color:{colour}">{"- -" if dash else "—"} {label}</span>' for _, label, colour, dash in SERIES
    )
    return f'<div class="memory-lanes"><div class="memory-legend">{legend}</div>{"".join(charts)}</div>'
