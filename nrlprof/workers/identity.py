"""Who a Ray actor is: the names it is matched under, the name it is reported under, its rank."""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass

from nrlprof.layout import file_safe
from nrlprof.workers.frameworks import AREAL, NEMO_RL, OPENRLHF, RLINF, ROLE_NAMED, SKYRL, VERL

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(class_name: str) -> str:
    """`DTensorPolicyWorker` -> `dtensor_policy_worker`.

    An `_` goes only before an upper-case letter that follows a lower-case letter or digit.
    """
    return _CAMEL_BOUNDARY.sub("_", class_name).lower()


def rlinf_group(actor_name: str | None) -> str | None:
    """RLinf names each rank's actor `<group>:<rank>` (`<group>:<rank>:<rank>` below a parent rank)."""
    if not actor_name or ":" not in actor_name:
        return None
    return actor_name.split(":", 1)[0] or None


def areal_role(actor_name: str | None) -> str | None:
    """AReaL's RayScheduler names each worker `<role>/<index>` (`actor/0`, `rollout/1`)."""
    if not actor_name or "/" not in actor_name:
        return None
    return actor_name.rsplit("/", 1)[0] or None


@dataclass(frozen=True)
class WorkerIdentity:
    """`roles`: the roles a framework fused into this one actor (verl's WorkerDict hosting `actor_rollout` and
    `critic`); the actor is matched under each of them too, and reported as `worker_dict-actor_rollout-critic`.
    `framework`: the framework whose class it is (nrlprof.workers.frameworks), which says what a pattern means.
    SkyRL's, AReaL's and slime's workers are their roles (`policy`; `actor-ref`, an AReaL worker hosting a colocated
    role; slime's `actor` and `critic`, one class): reported under them, and matched by them."""

    class_name: str
    actor_name: str | None
    rank: int
    explicit_name: str | None = None
    roles: tuple[str, ...] = ()
    framework: str | None = None

    @property
    def match_names(self) -> tuple[str, ...]:
        """The names a pattern is matched against, as the worker's framework names its workers.

        NeMo RL: its worker-type name only (`dtensor_policy_worker`), never its actor name (`lm_policy-0-0`);
        verl: its roles, its fused name and its class; RLinf: its worker group; OpenRLHF: its actor class;
        a plain Ray actor: its actor name and class.
        """
        names = [self.explicit_name] if self.explicit_name else []
        group = rlinf_group(self.actor_name) if self.framework == RLINF else None
        roles = self.framework_roles
        if self.framework == NEMO_RL:
            names.append(snake_case(self.class_name))
        elif group is not None:
            names.append(group)
        elif roles:
            names += [*roles, "-".join(roles)]
            if self.framework == AREAL and self.actor_name:
                names.append(self.actor_name)
            if self.framework == SKYRL:  # its classes are role-specific (FSDPPolicyWorkerBase); slime's and AReaL's not
                names += [self.class_name, snake_case(self.class_name)]
        else:
            if self.actor_name and self.framework not in (VERL, OPENRLHF):
                names.append(self.actor_name)
            names += [self.class_name, snake_case(self.class_name), *self.roles]
            if self.roles:
                names.append(self.name)
        return tuple(dict.fromkeys(names))

    @property
    def framework_roles(self) -> tuple[str, ...]:
        """The roles a SkyRL, AReaL or slime worker is (an AReaL worker's own from its actor name first)."""
        if self.framework not in ROLE_NAMED:
            return ()
        own = areal_role(self.actor_name) if self.framework == AREAL else None
        return tuple(dict.fromkeys((own, *self.roles) if own else self.roles))

    @property
    def name(self) -> str:
        """The name files and log lines use: an RLinf worker's group, a SkyRL, AReaL or slime worker's roles, else
        the class in snake case (with the roles verl fused into it)."""
        if self.explicit_name:
            return self.explicit_name
        group = rlinf_group(self.actor_name) if self.framework == RLINF else None
        if group is not None:
            return group
        roles = self.framework_roles
        if roles:
            return "-".join(roles)
        return "-".join((snake_case(self.class_name), *self.roles))

    @property
    def file_name(self) -> str:
        return file_safe(self.name)


class RankCounter:
    """Creation order among actors reported under the same name: 0, 1, ..."""

    def __init__(self) -> None:
        self._next: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def take(self, name: str) -> int:
        with self._lock:
            rank = self._next[name]
            self._next[name] += 1
            return rank


def rank_from_env_vars(env_vars: object) -> int | None:
    if isinstance(env_vars, dict):
        value = env_vars.get("RANK")
        if value is not None:
            try:
                return int(str(value).strip())
            except ValueError:
                return None
    return None


def discrete_method_names(methods: tuple[str, ...], roles: tuple[str, ...]) -> frozenset[str]:
    """The actor methods a listed method is called by: itself, and `<role>_<method>` on a fused worker (verl's
    WorkerDict calls its actor_rollout role's `generate_sequences` as `actor_rollout_generate_sequences`)."""
    return frozenset(methods) | {f"{role}_{method}" for role in roles for method in methods}
