"""What one YAML front end (verl or RLinf) contributes to a plan."""

from __future__ import annotations

from dataclasses import dataclass

from nrlprof.config.plan import BackendPlan


@dataclass(frozen=True)
class Fragment:
    """Backends, and the TorchSettings fields a front end sets."""

    backends: tuple[BackendPlan, ...] = ()
    torch: tuple[tuple[str, object], ...] = ()
