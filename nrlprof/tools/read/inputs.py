"""The files under a command's inputs, found in one walk and sorted by kind for the readers that take them.

A directory is walked once, recursively (a symbolic link to a directory is not followed); a file whose name
starts with `.` is no input (a dot-directory is walked: manifests live in `.nrlprof/`). A file named on the
command line is taken as it is. A missing input raises ToolError.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.layout import (
    MANIFEST_GLOB,
    MEMORY_FIGURES_SUFFIX,
    MEMORY_SNAPSHOT_SUFFIX,
    NSYS_EXPORT_SUFFIX,
    NSYS_SUFFIXES,
)

JSON_SUFFIXES = (".json", ".json.gz")  # a trace, when it holds traceEvents
ANATOMY_DIR = "step_anatomy"


@dataclass
class Inputs:
    """What one walk found: each list sorted within each input, the inputs in the order given (the memory
    backend's files sorted across all inputs)."""

    traces: list[tuple[Path, bool]] = field(default_factory=list)  # JSON files; True: named on the command line
    nsys_reports: list[Path] = field(default_factory=list)
    nsys_exports: list[Path] = field(default_factory=list)
    memory_figures: list[Path] = field(default_factory=list)
    memory_snapshots: list[Path] = field(default_factory=list)
    manifests: list[Path] = field(default_factory=list)  # found in a directory, not named
    anatomy_dirs: list[Path] = field(default_factory=list)  # directories named step_anatomy
    names: set[str] = field(default_factory=set)  # every name in a directory walked that is not a directory

    def _add(self, path: Path, named: bool) -> None:
        name = path.name
        if name.startswith(".") and not named:
            return
        if name.endswith(JSON_SUFFIXES):
            self.traces.append((path, named))
        if name.endswith(NSYS_SUFFIXES):
            self.nsys_reports.append(path)
        elif name.endswith(NSYS_EXPORT_SUFFIX):
            self.nsys_exports.append(path)
        elif name.endswith(MEMORY_SNAPSHOT_SUFFIX):
            self.memory_snapshots.append(path)
        if name.endswith(MEMORY_FIGURES_SUFFIX):
            self.memory_figures.append(path)

    def add_found(self, path: Path) -> None:
        """A file met in a directory walk (or listed on a node): by kind, and its name among those present."""
        self._add(path, named=False)
        if fnmatch.fnmatchcase(path.name, MANIFEST_GLOB):
            self.manifests.append(path)
        self.names.add(path.name)

    def _walk(self, root: Path) -> None:
        for path in sorted(root.rglob("*")):
            if path.is_dir():
                if path.name == ANATOMY_DIR:
                    self.anatomy_dirs.append(path)
            elif path.is_file():
                self.add_found(path)
            else:
                self.names.add(path.name)


def find_inputs(inputs: Iterable[Path]) -> Inputs:
    """Every input file under `inputs` (files or directories), by kind; ToolError for an input that is missing."""
    found = Inputs()
    for root in map(Path, inputs):
        if root.is_file():
            found._add(root, named=True)
        elif root.is_dir():
            found._walk(root)
        else:
            raise ToolError("no such file or directory", root)
    found.memory_figures = sorted(set(found.memory_figures))
    found.memory_snapshots = sorted(set(found.memory_snapshots))
    return found


def classify(paths: Iterable[Path]) -> Inputs:
    """The files `paths` (listed, not walked: a node's files for a summary there) by kind, in the order given."""
    found = Inputs()
    for path in paths:
        found.add_found(Path(path))
    return found
