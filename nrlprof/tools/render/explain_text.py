"""`nrlprof explain` as text: the findings ranked by impact, each with its evidence, where to look and what to try;
then the steps' critical path by phase, rollout and training's overlap, and what the data cannot tell."""

from __future__ import annotations

from nrlprof.tools.advice.explain import Explanation
from nrlprof.tools.advice.finding import MIN_IMPACT_PCT, Finding, step_list
from nrlprof.tools.advice.phases import PHASES
from nrlprof.tools.advice.step_facts import CONTROLLER, PROFILER

STEP_ROWS = 12  # steps listed in the table: the slowest, in step order


def finding_lines(finding: Finding, number: int) -> list[str]:
    who = finding.worker or ""
    if finding.rank is not None:
        who += f" rank {finding.rank}"
    lines = [f"{number}. [{finding.kind}, {finding.impact_pct:.0f}%] {finding.summary}"]
    figures = ", ".join(f"{key} {_shown(value)}" for key, value in finding.figures.items() if key != "slow")
    lines.append(f"   evidence: {figures} (threshold: {finding.threshold}); steps {step_list(finding.steps)}"
                 + (f"; {who}" if who else ""))  # fmt: skip
    for slow in finding.figures.get("slow", [])[:5]:
        rank = "" if slow["slowest_rank"] is None else f" rank {slow['slowest_rank']}"
        lines.append(
            f"     step {slow['step']}: {slow['factor']}x the median ({slow['wall_ms']:.0f} ms); "
            f"{slow['slowest']}{rank} {slow['slowest_ms']:.0f} ms against {slow['slowest_median_ms']:.0f} ms"
        )
    if finding.look is not None:
        lines.append(f"   look: {finding.look}")
    lines.append(f"   try: {finding.advice}")
    return lines


def render_explanation(explanation: Explanation, everything: bool = False) -> str:
    shown = explanation.shown(everything)
    left_out = len(explanation.findings) - len(shown)
    steps = explanation.steps
    head = f"nrlprof explain: {explanation.directory}"
    if steps:
        head += f" ({len(steps)} step(s): {step_list([int(s) for s in steps])})"
    lines = [head, ""]
    if shown:
        lines.append("What holds the steps back, most first:")
        for number, finding in enumerate(shown, 1):
            lines += finding_lines(finding, number)
    else:
        lines.append("No finding above the thresholds: nothing stands out in what was read.")
    if left_out:
        lines.append(f"({left_out} finding(s) under {MIN_IMPACT_PCT:.0f}% left out: --all shows them)")
    if steps:
        lines += ["", *_step_table(steps)]
    if explanation.overlap is not None:
        total = explanation.overlap["total_ms"]
        lines += [
            "",
            "Rollout and training, from the calls' overlaps (not from framework counters), over the steps read: "
            f"trainer waits on rollout {total['trainer_waits_on_rollout_ms']:.0f} ms, rollout waits on the trainer "
            f"{total['rollout_waits_on_trainer_ms']:.0f} ms, both run {total['overlap_ms']:.0f} ms, weight-sync "
            f"bubble {total['weight_sync_bubble_ms']:.0f} ms",
        ]
    if explanation.cannot_tell:
        lines += ["", "What the data cannot tell:"]
        lines += [f"- {sentence}" for sentence in explanation.cannot_tell]
    if explanation.notes:
        lines += ["", "Notes:"]
        lines += [f"- {note}" for note in explanation.notes]
    return "\n".join(lines) + "\n"


def top_lines(explanation: Explanation, count: int = 3) -> list[str]:
    """The top findings in one line each (the end of `summary`)."""
    shown = explanation.shown()[:count]
    if not shown:
        return []
    lines = [f"Top findings (nrlprof explain for the evidence): {len(shown)} of {len(explanation.shown())}"]
    lines += [f"  {i}. [{f.kind}, {f.impact_pct:.0f}%] {f.summary}" for i, f in enumerate(shown, 1)]
    return lines


def _step_table(steps: dict[str, dict]) -> list[str]:
    columns = [p for p in (*PHASES, CONTROLLER, PROFILER) if any(p in s["phases_ms"] for s in steps.values())]
    slowest = sorted(steps, key=lambda s: -steps[s]["wall_ms"])[:STEP_ROWS]
    chosen = sorted(slowest, key=int)
    title = "The critical path by phase, ms"
    if len(chosen) < len(steps):
        title += f" (the {len(chosen)} slowest of {len(steps)} steps; --json has every one)"
    rows = [["step", "wall", "bound", *columns]]
    for step in chosen:
        entry = steps[step]
        rows.append([step, f"{entry['wall_ms']:.1f}", entry["bound"],
                     *(f"{entry['phases_ms'].get(c, 0.0):.1f}" for c in columns)])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = ["  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    return [title + ":", *table]


def _shown(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} {_shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
