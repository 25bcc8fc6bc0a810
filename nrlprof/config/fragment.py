"""What one front end (verl, RLinf, SkyRL, AReaL, slime) contributes to a plan."""

from __future__ import annotations

from dataclasses import dataclass, replace

from nrlprof.config.plan import BackendPlan, Plan


@dataclass(frozen=True)
class Fragment:
    """Backends, and the TorchSettings fields a front end sets."""

    backends: tuple[BackendPlan, ...] = ()
    torch: tuple[tuple[str, object], ...] = ()

    def plan(self, source: str, base: Plan | None = None) -> Plan:
        """The base plan (an empty one by default) with this fragment's backends and torch settings."""
        plan = base or Plan()
        for backend in self.backends:
            plan = plan.with_backend(backend)
        sources = (*plan.sources, *(f"{source}:{b.kind}" for b in self.backends))
        return replace(plan, torch=replace(plan.torch, **dict(self.torch)), sources=sources)
