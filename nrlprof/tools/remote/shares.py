"""A node's files in at most `jobs` shares of about equal bytes, one Ray task each.

An Nsight Systems report and its SQLite export (`<stem>.nsys-rep`, `<stem>.sqlite` in one directory) go to one
share, so the report is not exported again beside an export another task reads.
"""

from __future__ import annotations

import os

from nrlprof.layout import NSYS_EXPORT_SUFFIX, NSYS_SUFFIXES, nsys_stem
from nrlprof.tools.remote.listing import NodeFile


def _unit_key(file: NodeFile) -> tuple[str, str]:
    directory, name = os.path.split(file.source)
    if name.endswith((*NSYS_SUFFIXES, NSYS_EXPORT_SUFFIX)):
        return directory, nsys_stem(name)
    return directory, name


def split_shares(files: list[NodeFile], jobs: int) -> list[list[NodeFile]]:
    """At most `jobs` non-empty shares: each unit of files, largest first, to the share with the fewest bytes."""
    units: dict[tuple[str, str], list[NodeFile]] = {}
    for file in files:
        units.setdefault(_unit_key(file), []).append(file)
    shares: list[list[NodeFile]] = [[] for _ in range(max(1, min(jobs, len(units))))]
    loads = [0] * len(shares)
    for unit in sorted(units.values(), key=lambda unit: -sum(f.size for f in unit)):
        least = loads.index(min(loads))
        shares[least] += unit
        loads[least] += sum(f.size for f in unit)
    return [share for share in shares if share]
