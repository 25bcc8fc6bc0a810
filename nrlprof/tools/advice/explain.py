"""Why a job's steps are slow: every rule run over one summary (and its step anatomy), findings ranked by impact.

`explain(summary, phases, chosen)` returns an `Explanation`; `to_json()` is `nrlprof explain --json`:
`{"findings": [...], "steps": {"<n>": {"wall_ms", "bound", "phases_ms"}}, "phases": {"<worker>.<method>": phase},
"overlap": {...} (rollout and training both seen), "cannot_tell": [...]}`. What the data cannot tell is said in
`cannot_tell`, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nrlprof.tools.advice.evidence import Evidence
from nrlprof.tools.advice.finding import MIN_IMPACT_PCT, Finding
from nrlprof.tools.advice.phases import PhaseMap
from nrlprof.tools.advice.rules_device import exposed_comm_findings
from nrlprof.tools.advice.rules_ranks import anatomy_rank_findings, collective_stragglers
from nrlprof.tools.advice.rules_run import memory_growth_findings, profiler_distortion_finding
from nrlprof.tools.advice.rules_steps import bound_finding, controller_finding, idle_findings, slow_steps_finding
from nrlprof.tools.advice.step_facts import StepFacts, step_facts
from nrlprof.tools.figures.model import Summary

FORMAT = 1  # of `explain --json`


@dataclass
class Explanation:
    directory: str
    findings: list[Finding] = field(default_factory=list)  # every one, most impact first
    steps: dict[str, dict] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)
    overlap: dict | None = None
    cannot_tell: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the summary's: files skipped, windows not ok

    def shown(self, everything: bool = False) -> list[Finding]:
        return [f for f in self.findings if everything or f.impact_pct >= MIN_IMPACT_PCT]

    def to_json(self, everything: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": FORMAT,
            "directory": self.directory,
            "findings": [f.to_json() for f in self.shown(everything)],
            "steps": self.steps,
            "phases": self.phases,
        }
        if self.overlap is not None:
            data["overlap"] = self.overlap
        return {**data, "cannot_tell": self.cannot_tell, "notes": self.notes}


def engines_over_http(facts: StepFacts) -> list[str]:
    """Groups that serve generation over HTTP (SkyRL's VLLMServerActor): no Ray call per request to see."""
    servers = [g for g in facts.tables.calls.workers if "server" in g]
    return [
        f"{group} serves requests over HTTP: they are no Ray calls, so the step anatomy counts their time as the "
        "controller's (or its caller's); a torch or nsys window on it shows the generation"
        for group in servers
    ]


def explain(summary: Summary, phases: PhaseMap, chosen: set[int] | None = None) -> Explanation:
    """Every finding the summary's figures support, most impact first; what they cannot tell, said."""
    facts, cannot_tell = None, []
    if summary.anatomy_tables is not None:
        facts = step_facts(summary.anatomy_tables, phases, chosen)
        if not facts.windows:
            facts = None
        elif chosen is None and len(facts.windows) < len(summary.anatomy_tables.steps):
            first = int(summary.anatomy_tables.steps[0])
            cannot_tell.append(
                f"step {first}, the job's first, is left out of the step findings: its warm-up (engines "
                f"starting, compilation) is no slowdown (--steps {first}:{first + 1},... takes it in)"
            )
    evidence = Evidence(summary, facts, chosen, cannot_tell)
    if facts is None:
        evidence.cannot_tell.append(
            "no step anatomy"
            + (" for the steps asked for" if summary.anatomy_tables is not None else "")
            + ": the phases, the critical path, the controller's time, idle groups and slow steps need one "
            "(NRL_STEP_ANATOMY=1, on with any backend)"
        )
    traced = evidence.traced_workers
    if not any(w.step_gpu or w.step_cpu_comm for w in traced):
        evidence.cannot_tell.append(
            "no GPU activity or collectives in a torch or nsys window: exposed communication and stragglers in "
            "collectives need a window over the ranks of a group (NRL_TORCH_PROFILE_* or NRL_NSYS_*)"
        )
    elif not any(g.comm_union_us for w in traced for g in w.step_gpu.values()) and not any(
        w.step_cpu_comm for w in traced
    ):
        evidence.cannot_tell.append(
            "no collective (NCCL or gloo) in the windows read: exposed communication and stragglers in collectives "
            "have nothing to go on (a window over every rank of a data- or tensor-parallel group has them)"
        )
    stragglers = collective_stragglers(evidence)
    found: list[Finding | None] = [*stragglers, *exposed_comm_findings(evidence)]
    if facts is not None:
        evidence.cannot_tell += engines_over_http(facts)
        found += [bound_finding(evidence), controller_finding(evidence), slow_steps_finding(evidence)]
        found += idle_findings(evidence)
        found += anatomy_rank_findings(evidence, {f.worker for f in stragglers if f.worker})
    found += [profiler_distortion_finding(evidence), *memory_growth_findings(evidence)]
    if summary.sections.get("memory") is None:
        evidence.cannot_tell.append(
            "no memory figures: memory growth needs a memory window of 3 steps or more (NRL_MEMORY_PROFILE_*)"
        )
    findings = [f for f in found if f is not None]
    findings.sort(key=lambda f: (-f.impact_pct, f.kind, f.worker or "", f.rank if f.rank is not None else -1))
    return Explanation(
        directory=str(summary.directory),
        findings=findings,
        steps=facts.step_json() if facts is not None else {},
        phases=facts.method_phases if facts is not None else {},
        overlap=facts.overlap() if facts is not None else None,
        cannot_tell=evidence.cannot_tell,
        notes=[f"slow step caught: {c.describe(summary.anatomy_steps)}" for c in summary.caught]
        + list(summary.notes)
        + [f"skipped {path}: {reason}" for path, reason in summary.skipped],
    )
