"""The step anatomy as text: per step one line per phase and the critical path; what grows; two runs compared."""

from __future__ import annotations

from nrlprof.tools.figures.anatomy import phase_growth


def render_anatomy_text(model: dict) -> str:
    steps = model.get("steps") or {}
    if not steps:
        return "step anatomy: no step recorded\n"
    lines = ["step anatomy (times from each step's start)"]
    for label, step in sorted(steps.items(), key=lambda item: int(item[0])):
        caught = step.get("caught")
        mark = ""
        if caught:
            against = (
                "a rank's call over its peers'" if caught["cause"] == "straggler at step" else "the median before it"
            )
            done = "its traces kept" if caught["kept"] else "a window opened at the next step"
            mark = f"  (caught slow: {caught['factor']:.1f}x {against}; {done})"
        lines.append(f"step {label}: {step['wall_ms']:.1f} ms{mark}")
        if own := step.get("profiler"):
            lines.append(f"  {own['start_ms']:>10.1f} +{own['ms']:>10.1f} ms  nrlprof in the driver: {own['actions']}")
        for phase in step["phases"]:
            ranks = phase["ranks"]
            rank_text = f"ranks {_ranks(ranks)}" if len(ranks) > 1 else f"rank {ranks[0]}"
            lines.append(
                f"  {phase['start_ms']:>10.1f} +{phase['dur_ms']:>10.1f} ms  {phase['worker']}.{phase['method']}"
                f"  {phase['calls']} call(s), {rank_text}"
                + (f", slowest rank {phase['slowest_rank']} (+{phase['spread_ms']:.1f} ms)" if len(ranks) > 1 else "")
            )
        path = " -> ".join(f"{p['worker']}.{p['method']}" for p in step["critical_path"])
        lines.append(f"  critical path: {path or '(no call)'}")
    lines.extend(_growth_lines(steps))
    return "\n".join(lines) + "\n"


def _growth_lines(steps: dict) -> list[str]:
    rows = phase_growth(steps)
    if not rows:
        return []
    lines = ["across steps (mean duration, first third -> last third of the steps it ran in):"]
    for name, early, late, count in rows:
        change = late - early
        trend = (
            "grows" if change > 0.1 * max(early, 1.0) else ("shrinks" if change < -0.1 * max(early, 1.0) else "flat")
        )
        lines.append(f"  {name}: {early:.1f} -> {late:.1f} ms ({change:+.1f} ms, {trend}, {count} steps)")
    return lines


def _ranks(ranks: list[int]) -> str:
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(str(r) for r in ranks)


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
