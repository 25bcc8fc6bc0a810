"""Which framework an actor class belongs to, read from the modules of its class and bases.

A pattern means what that framework says it means (nrlprof.workers.identity): NeMo RL's worker-type names,
verl's roles and worker names, RLinf's worker-group names, OpenRLHF's actor classes.
"""

from __future__ import annotations

NEMO_RL = "nemo_rl"
VERL = "verl"
RLINF = "rlinf"
OPENRLHF = "openrlhf"
FRAMEWORKS = (NEMO_RL, VERL, RLINF, OPENRLHF)


def framework_of_module(module_name: str | None) -> str | None:
    root = (module_name or "").split(".", 1)[0]
    return root if root in FRAMEWORKS else None


def framework_of_class(cls: type | None) -> str | None:
    """The framework whose module defines the class or one of its bases (a job's own subclass of RLinf's
    `Worker` is RLinf's); None for a plain Ray actor."""
    for klass in getattr(cls, "__mro__", ()):
        framework = framework_of_module(getattr(klass, "__module__", None))
        if framework is not None:
            return framework
    return None
