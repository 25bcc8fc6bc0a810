"""Who a Ray actor is: the names it is matched under, the name it is reported under, its rank."""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass

from nrlprof.layout import file_safe

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(class_name: str) -> str:
    """`DTensorPolicyWorker` -> `dtensor_policy_worker`.

    An `_` goes only before an upper-case letter that follows a lower-case letter or digit.
    """
    return _CAMEL_BOUNDARY.sub("_", class_name).lower()


@dataclass(frozen=True)
class WorkerIdentity:
    """`roles`: the roles a framework fused into this one actor (verl's WorkerDict hosting `actor_rollout` and
    `critic`); the actor is matched under each of them too, and reported as `worker_dict-actor_rollout-critic`."""

    class_name: str
    actor_name: str | None
    rank: int
    explicit_name: str | None = None
    roles: tuple[str, ...] = ()

    @property
    def match_names(self) -> tuple[str, ...]:
        names = [self.actor_name] if self.actor_name else []
        names += [self.class_name, snake_case(self.class_name), *self.roles]
        if self.roles:
            names.append(self.name)
        if self.explicit_name:
            names.insert(0, self.explicit_name)
        return tuple(dict.fromkeys(names))

    @property
    def name(self) -> str:
        """The name files and log lines use."""
        if self.explicit_name:
            return self.explicit_name
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
