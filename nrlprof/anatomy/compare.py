"""Two runs' step anatomies side by side: each phase's duration per step, with the change."""

from __future__ import annotations


def anatomy_diff(a: dict, b: dict) -> dict:
    """`{"steps": {"<n>": {"wall_ms": {...}, "phases": {"<worker>.<method>": {a, b, change}}}}}` for steps in both."""
    steps = {}
    for step in sorted(a.get("steps", {}).keys() & b.get("steps", {}).keys(), key=int):
        sa, sb = a["steps"][step], b["steps"][step]
        phases_a = {f"{p['worker']}.{p['method']}": float(p["dur_ms"]) for p in sa.get("phases", [])}
        phases_b = {f"{p['worker']}.{p['method']}": float(p["dur_ms"]) for p in sb.get("phases", [])}
        steps[step] = {
            "wall_ms": _change(float(sa.get("wall_ms") or 0.0), float(sb.get("wall_ms") or 0.0)),
            "phases": {name: _change(phases_a[name], phases_b[name]) for name in sorted(phases_a.keys() & phases_b)},
            "only_in_a": sorted(phases_a.keys() - phases_b.keys()),
            "only_in_b": sorted(phases_b.keys() - phases_a.keys()),
        }
    return {"steps": steps}


def anatomy_diff_lines(result: dict) -> list[str]:
    """Per step: the wall time change and the phase that changed most."""
    lines = []
    for step, figures in result["steps"].items():
        wall = figures["wall_ms"]
        line = f"step {step}: wall {wall['a']:.1f} -> {wall['b']:.1f} ms ({wall['change']:+.1f})"
        if figures["phases"]:
            name, most = max(figures["phases"].items(), key=lambda item: abs(item[1]["change"]))
            line += f"; most changed phase {name} {most['a']:.1f} -> {most['b']:.1f} ms ({most['change']:+.1f})"
        lines.append(line)
    return lines


def _change(old: float, new: float) -> dict:
    return {
        "a": old,
        "b": new,
        "change": round(new - old, 3),
        "change_pct": round(100 * (new - old) / old, 1) if old else None,
    }
