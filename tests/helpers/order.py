"""The suite in a shuffled order (`NRLPROF_TEST_SHUFFLE=<seed>`): sharing a cluster must not make order matter."""

from __future__ import annotations

import random
from typing import TypeVar

from helpers import scheduling

Item = TypeVar("Item")


def shuffled(items: list[Item], rng: random.Random, file_of=lambda item: scheduling.file_of(item.nodeid)) -> list[Item]:
    """The test files in a random order, and each file's tests in a random order (a file stays one unit: pytest-xdist
    hands out whole files, and a module's own cluster starts once)."""
    by_file: dict[str, list[Item]] = {}
    for item in items:
        by_file.setdefault(file_of(item), []).append(item)
    files = list(by_file.values())
    rng.shuffle(files)
    for tests in files:
        rng.shuffle(tests)
    return [item for tests in files for item in tests]
