"""The memory section of the text summary: figures per step, growth findings, the snapshots' top allocations."""

from __future__ import annotations

from typing import Any

from nrlprof.tools.figures.memory import MEMORY_FIGURES, NO_RANK


def _cell(value: Any) -> str:
    return f"{value:>10.1f}" if isinstance(value, (int, float)) else f"{'-':>10}"


def render_memory_text(model: dict[str, Any], findings: list[str]) -> str:
    """The memory section of the text summary: figures per step, growth findings, the snapshots' top allocations."""
    workers = model.get("workers", {})
    if not workers and not model.get("snapshots"):
        return ""
    lines = ["memory (MB, at each step's end; peak: the highest during the step; CUDA: summed over devices)"]
    header = ["host rss", "host peak", "cuda alloc", "cuda resv", "cuda peak"]
    for worker, ranks in workers.items():
        for rank, entry in ranks.items():
            lines.append(f"  {worker if rank == NO_RANK else f'{worker} rank {rank}'} ({entry['host']})")
            lines.append(f"    {'step':>6}" + "".join(f"{h:>10}" for h in header))
            for step, figures in sorted(entry["steps"].items(), key=lambda item: int(item[0])):
                lines.append(f"    {step:>6}" + "".join(_cell(figures.get(name)) for name in MEMORY_FIGURES))
    if findings:
        lines.append("memory grows at every step:")
        lines.extend(f"  {finding}" for finding in findings)
    for snapshot in model.get("snapshots", []):
        who = snapshot["worker"] if snapshot["rank"] is None else f"{snapshot['worker']} rank {snapshot['rank']}"
        kind = "out-of-memory snapshot" if snapshot["oom"] else f"snapshot of steps {snapshot['window']}"
        lines.append(f"{kind}, {who}: {snapshot['path']}")
        if "error" in snapshot:
            lines.append(f"  unreadable: {snapshot['error']}")
            continue
        if not snapshot["top"]:
            lines.append("  no live allocation at its peak")
        for row in snapshot["top"]:
            lines.append(
                f"  {row['size_mb']:>10.1f} MB  device {row['device']} (peak {row['peak_mb']:.1f} MB)  {row['frame']}"
            )
    return "\n".join(lines) + "\n"
