"""A bound on what OmegaConf's `${...}` interpolations expand to, estimated before resolving them.

Each `${key}` counts as a copy of what `key` expands to, so a file whose lines each repeat the line
before (an "interpolation bomb") is refused while it is still small.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_INNERMOST = re.compile(r"\$\{([^${}]*)\}")
_NODE_KEY = re.compile(r"^\.*[A-Za-z0-9_\-\[\]]+(\.[A-Za-z0-9_\-\[\]]+)*$")


class InterpolationTooLarge(Exception):
    """The estimate exceeded the bound."""


def _referenced_key(body: str) -> str | None:
    body = body.strip()
    if body.startswith("oc.select:"):
        body = body.removeprefix("oc.select:").split(",", 1)[0].strip()
    return body if _NODE_KEY.match(body) else None


def _absolute(reference: str, parent: tuple[str, ...]) -> tuple[str, ...]:
    """`a.b` from the root; `.b` beside the referring value, each further leading dot one level up."""
    dots = len(reference) - len(reference.lstrip("."))
    parts = tuple(p for p in reference.lstrip(".").split(".") if p)
    if dots == 0:
        return parts
    base = parent[: max(len(parent) - (dots - 1), 0)]
    return base + parts


class _Estimate:
    def __init__(self, root: Mapping, bound: int) -> None:
        self.root = root
        self.bound = bound
        self.sizes: dict[tuple[str, ...], int] = {}
        self.open: set[tuple[str, ...]] = set()

    def node(self, path: tuple[str, ...]) -> object:
        value: object = self.root
        for part in path:
            if isinstance(value, Mapping) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return None
        return value

    def size_at(self, path: tuple[str, ...]) -> int:
        if path in self.sizes:
            return self.sizes[path]
        if path in self.open:
            return 0  # a cycle: OmegaConf reports it when resolving
        self.open.add(path)
        size = self.size_of(self.node(path), path)
        self.open.discard(path)
        self.sizes[path] = size
        if size > self.bound:
            raise InterpolationTooLarge(f"its interpolations expand to more than {self.bound} characters")
        return size

    def size_of(self, value: object, path: tuple[str, ...]) -> int:
        if isinstance(value, Mapping):
            return 1 + sum(self.size_at((*path, str(k))) for k in value)
        if isinstance(value, list):
            return 1 + sum(self.size_at((*path, str(i))) for i in range(len(value)))
        if not isinstance(value, str) or "${" not in value:
            return 1 if not isinstance(value, str) else len(value) + 1
        size = len(value) + 1
        for body in _INNERMOST.findall(value):
            reference = _referenced_key(body)
            if reference is not None:
                size += self.size_at(_absolute(reference, path[:-1]))
        return size


def check_interpolation_size(data: Mapping, bound: int) -> None:
    """Raise InterpolationTooLarge when resolving `data` would build more than `bound` characters or values."""
    _Estimate(data, bound).size_at(())
