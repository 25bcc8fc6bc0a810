"""`nrlprof collect` takes one job (one Ray session dir) by default, on a real multi-node cluster with old sessions."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

from nrlprof.tools.cluster import alive_nodes
from nrlprof.tools.collect import collector as C
from nrlprof.tools.commands import collect as collect_command

OLD = ["session_2020-01-01_00-00-00_000000_1", "session_2021-06-01_00-00-00_000000_1"]
NEWER_WITHOUT_MANIFEST = "session_2099-01-01_00-00-00_000000_1"


def put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def plant(session: Path, tag: str, with_manifest: bool) -> set[str]:
    """A report (and a manifest) in `session`; returns the file names planted."""
    put(session / "logs" / "nsight" / f"{tag}.nsys-rep", tag.encode())
    names = {f"{tag}.nsys-rep"}
    if with_manifest:
        line = json.dumps({"backend": "nsys", "worker": "policy", "files": []})
        put(session / "logs" / "nrlprof" / f"manifest-{tag}.jsonl", line.encode() + b"\n")
        names.add(f"manifest-{tag}.jsonl")
    return names


@pytest.fixture(scope="module")
def job(on_multi_node):
    """Head: the current session holds a manifest. Workers: their current session only a report, old ones manifests.

    Every node also holds a newer session dir with a report and no manifest (another cluster's, say).
    """
    current = on_multi_node.session
    labels = {n.node_id: n.label for n in alive_nodes()}
    files: dict[str, dict[str, set[str]]] = {}
    for node_id in (on_multi_node.head, *on_multi_node.workers):
        label, temp = labels[node_id], on_multi_node.temp_dirs[node_id]
        assert (temp / current).is_dir()
        files[label] = {current: plant(temp / current, f"{label}-current", node_id == on_multi_node.head)}
        for name in OLD:
            files[label][name] = plant(temp / name, f"{label}-{name[8:12]}", True)
        files[label][NEWER_WITHOUT_MANIFEST] = plant(temp / NEWER_WITHOUT_MANIFEST, f"{label}-newer", False)
    return {"current": current, "files": files, "head_temp": on_multi_node.temp_dirs[on_multi_node.head]}


def expected(job: dict, sessions: list[str]) -> set[str]:
    return {
        f"{label}/{session}/{name}"
        for label, by_session in job["files"].items()
        for session in sessions
        for name in by_session[session]
    }


def collected(result: C.CollectResult) -> set[str]:
    """node/session/file-name of every file copied."""
    return {f"{Path(c.path).parts[0]}/{Path(c.path).parts[1]}/{Path(c.path).name}" for c in result.copied}


def test_default_is_the_newest_session_holding_manifests_on_every_node(job, tmp_path):
    """Another user's session dir, not chosen, is no reason for a partial result."""
    foreign = job["head_temp"] / "session_2019-01-01_00-00-00_000000_1"
    plant(foreign, "foreign", True)
    os.chown(foreign, 65534, 65534)
    try:
        result = C.collect(tmp_path / "out")
    finally:
        shutil.rmtree(foreign)
    assert result.ok, result.to_json()
    assert result.sessions == [job["current"]]
    assert collected(result) == expected(job, [job["current"]])


def test_session_names_one_old_job(job, tmp_path):
    result = C.collect(tmp_path / "out", session=OLD[0])
    assert result.sessions == [OLD[0]]
    assert collected(result) == expected(job, [OLD[0]])


def test_all_sessions_takes_every_session_dir(job, tmp_path, capsys):
    args = argparse.Namespace(to=str(tmp_path / "out"), address=None, json=True, session=None, all_sessions=True,
                              allow_dir=[])  # fmt: skip
    assert collect_command.run(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sessions"] is None
    copied = {f"{Path(c['path']).parts[0]}/{Path(c['path']).parts[1]}/{Path(c['path']).name}" for c in data["copied"]}
    assert copied == expected(job, [job["current"], *OLD, NEWER_WITHOUT_MANIFEST])


def test_an_unknown_session_is_bad_input_naming_the_sessions_found(job, tmp_path):
    from nrlprof.tools.cluster import BadInput

    with pytest.raises(BadInput, match=f"session_1999-01-01.*no node has.*{OLD[0]}"):
        C.collect(tmp_path / "out", session="session_1999-01-01_00-00-00_000000_1")


def test_session_and_all_sessions_exclude_each_other(tmp_path):
    from nrlprof.tools.cluster import BadInput

    with pytest.raises(BadInput, match="exclude"):
        C.collect(tmp_path / "out", session=OLD[0], all_sessions=True)
