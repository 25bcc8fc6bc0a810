"""Plain-text pieces shared by the views: names cut to a width, the slowest rank per step, memory and anatomy text."""

from __future__ import annotations

from typing import Any

from nrlprof.tools.figures.model import Straggler, Summary


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def straggler_line(row: Straggler) -> str:
    busy = f", GPU busy {row.gpu_busy_pct:.0f}%" if row.gpu_busy_pct is not None else ""
    who = f"{row.worker} rank {row.rank}" if row.rank is not None else row.worker
    return f"{who} {row.wall_ms:,.1f} ms = {row.spread:.2f}x median of {row.ranks} rank(s){busy}"


def step_lines(summary: Summary) -> list[str]:
    """One line per step: every worker kind's slowest rank and its spread."""
    return [f"step {step}: " + "; ".join(straggler_line(r) for r in rows) for step, rows in summary.stragglers.items()]


def sections_text(found: dict[str, Any]) -> str:
    parts = []
    if "memory" in found:
        from nrlprof.tools.render.memory_text import render_memory_text

        parts.append(render_memory_text(found["memory"], found["memory"]["findings"]))
    if "anatomy" in found:
        from nrlprof.tools.render.anatomy_text import render_anatomy_text

        parts.append(render_anatomy_text(found["anatomy"]))
    return "\n".join(parts)
