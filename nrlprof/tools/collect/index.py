"""The index of `nrlprof collect`: what was copied from where (size, mtime, sha256), so a re-run copies only changes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from nrlprof.tools.cluster import NodeInfo
from nrlprof.tools.collect.scan import RemoteFile, sha256_of
from nrlprof.tools.output import write_output

INDEX_NAME = ".nrlprof-collect.json"
INDEX_VERSION = 1


def load_index(to: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((to / INDEX_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


def save_index(to: Path, files: dict[str, dict[str, Any]]) -> None:
    text = json.dumps({"version": INDEX_VERSION, "files": files}, indent=1, sort_keys=True)
    write_output(to / INDEX_NAME, text.encode("utf-8"))


def known_sources(index: dict[str, dict[str, Any]], node: NodeInfo) -> dict[str, list]:
    """What the index knows of a node's files: source -> [size, mtime_ns, sha256]."""
    return {
        e["source"]: [e["size"], e["mtime_ns"], e["sha256"]]
        for e in index.values()
        if e.get("node") == node.label and {"source", "size", "mtime_ns", "sha256"} <= e.keys()
    }


def is_unchanged(to: Path, key: str, file: RemoteFile, index: dict[str, dict[str, Any]]) -> bool:
    local = to / key
    try:
        info = os.lstat(local)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size != file.size:
        return False
    entry = index.get(key) or {}
    if (entry.get("size"), entry.get("mtime_ns"), entry.get("sha256")) == (file.size, file.mtime_ns, file.sha256):
        return True
    return sha256_of(local) == file.sha256
