"""Which framework an actor class belongs to, read from the modules of its class and bases.

A pattern means what that framework says it means (nrlprof.workers.identity): NeMo RL's worker-type names,
verl's roles and worker names, RLinf's worker-group names, OpenRLHF's actor classes; SkyRL's, AReaL's and slime's
roles (policy, critic, ref; actor, rollout, ...), which their adapters record on the actor classes they create.
"""

from __future__ import annotations

NEMO_RL = "nemo_rl"
VERL = "verl"
RLINF = "rlinf"
OPENRLHF = "openrlhf"
SKYRL = "skyrl"
AREAL = "areal"
SLIME = "slime"
FRAMEWORKS = (NEMO_RL, VERL, RLINF, OPENRLHF, SKYRL, AREAL, SLIME)
# Frameworks whose workers are reported under their roles alone (`policy`, `actor-ref`): one actor class serves
# several roles (AReaL's RayRPCServer, slime's train actor), or the class names the backend (SkyRL's FSDP workers).
ROLE_NAMED = (SKYRL, AREAL, SLIME)
# What a pattern matches under each framework (the framework's name, what its patterns match).
PATTERN_MEANS = {
    NEMO_RL: ("NeMo RL", "its worker-type names"),
    VERL: ("verl", "its roles and worker classes"),
    RLINF: ("RLinf", "its worker-group names"),
    OPENRLHF: ("OpenRLHF", "its actor classes"),
    SKYRL: ("SkyRL", "its roles (policy, critic, ref) and worker classes"),
    AREAL: ("AReaL", "its roles (actor, critic, ref, rollout, ...) and worker names"),
    SLIME: ("slime", "its train actors' roles (actor, critic)"),
}


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
