"""How the suite is handed to pytest-xdist's workers.

A unit is a test file (a module's own cluster starts once), except that the files on a session cluster which each
worker would otherwise start for itself are one unit together, so that cluster starts once in the run. Units run
longest first, by the seconds recorded in tests/durations.json (`NRLPROF_TEST_RECORD_DURATIONS=1 scripts/test`
rewrites it), so no long unit is left for the end while the other worker idles.

Only the workers collect, so they write each file's unit to a file the controller's scheduler reads
(`NRLPROF_TEST_UNITS`, set by the controller). pytest-xdist's own groups (`--dist loadgroup`) do not serve: they
rename the tests' ids, which pytest 9.2 no longer lets a plugin do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
UNITS_VARIABLE = "NRLPROF_TEST_UNITS"
# The session fixtures whose cluster is started per worker: the files whose tests use one form a group of its name.
SESSION_CLUSTER_GROUPS = ("multi_node_cluster", "ray_start_head")


def group_of_file(fixtures_of_its_tests: Iterable[Iterable[str]]) -> str | None:
    """The group of a test file: the first of SESSION_CLUSTER_GROUPS that one of its tests uses, or None."""
    used = {name for fixtures in fixtures_of_its_tests for name in fixtures}
    return next((name for name in SESSION_CLUSTER_GROUPS if name in used), None)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def recorded_seconds(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds each test file took when last recorded; none where the file is missing."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def longest_first(unit_of_file: dict[str, str], seconds: dict[str, float]) -> list[str]:
    """The units by the recorded seconds of their files, longest first; among equals, in the order first named."""
    cost: dict[str, float] = {}
    for name, unit in unit_of_file.items():
        cost[unit] = cost.get(unit, 0.0) + seconds.get(name, 0.0)
    return sorted(cost, key=lambda unit: -cost[unit])


def record_seconds(seconds_by_file: dict[str, float], path: Path = DURATIONS) -> None:
    """Write each file's seconds (set-up, call and tear-down of its tests), longest first, whole seconds."""
    ordered = sorted(seconds_by_file.items(), key=lambda item: -item[1])
    path.write_text(json.dumps({name: round(s) for name, s in ordered if round(s) >= 1}, indent=1) + "\n")


def share_units(unit_of_file: dict[str, str]) -> None:
    """In a worker: each file's unit, for the controller (every worker writes the same, whole or not at all)."""
    target = os.environ.get(UNITS_VARIABLE)
    if target:
        partial = Path(f"{target}.{os.getpid()}")
        partial.write_text(json.dumps(unit_of_file))
        partial.replace(target)


class FilesAndGroups(LoadFileScheduling):
    """pytest-xdist's `loadfile`, with a group of files as one unit (the units the workers shared)."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self._unit_of_file: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._unit_of_file is None:  # first called once every worker has collected
            self._unit_of_file = json.loads(Path(os.environ[UNITS_VARIABLE]).read_text())
        name = file_of(nodeid)
        return self._unit_of_file.get(name, name)
