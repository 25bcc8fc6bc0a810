"""`nrlprof collect` on a real 3-node Ray cluster (three raylets on this machine, each with its own temp dir); the
node-loss tests add a node of their own and kill it."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from nrlprof.manifest import WindowRecord, append_record
from nrlprof.rayfix.node_tasks import pinned
from nrlprof.tools.cluster import BadInput, alive_nodes
from nrlprof.tools.collect import collector as C
from nrlprof.tools.collect import scan as S
from nrlprof.tools.collect.index import INDEX_NAME
from nrlprof.tools.commands import collect as collect_command

CHUNK = 64 * 1024
STALE_SESSION = "session_2020-01-01_00-00-00_000000_1"

# Workers cannot import this test module: ship its functions by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def write_node_outputs(base: str, index: int) -> dict:
    """Runs on a node: fake reports in its session logs, a manifest, torch traces; returns what collect must take.

    An older session dir (another job's) gets a report too: collect must leave it alone.
    """
    temp_dir = Path(S.node_temp_dir())
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    written = {}

    def put(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written[str(path)] = data

    put(session / "logs" / "nsight" / f"policy_3-4_{index}.nsys-rep", os.urandom(1000 + index))
    if index == 0:
        put(session / "logs" / "nsight" / "big.nsys-rep", os.urandom(2 * CHUNK + 12345))
        put(session / "logs" / "rocprof_sys" / "w_1" / "trace.proto", os.urandom(300))
        stale = temp_dir / STALE_SESSION / "logs" / "nsight" / "old.nsys-rep"
        stale.parent.mkdir(parents=True, exist_ok=True)
        stale.write_bytes(os.urandom(500))
    trace = Path(base, f"node{index}", "trace", "policy", "0", f"policy_rank0_steps3-4_{index}.pt.trace.json")
    put(trace, json.dumps({"traceEvents": [], "node": index}).encode())
    record = WindowRecord("torch", "policy", 0, [3, 4], "3-4", files=[str(trace), f"/nonexistent/{index}.json"])
    manifest = append_record(session / "logs" / "nrlprof", record)
    written[str(manifest)] = manifest.read_bytes()
    return {"node_id": ray.get_runtime_context().get_node_id(), "temp_dir": str(temp_dir), "files": written}


def expected_destination(source: str, temp_dir: str) -> str:
    if source.startswith(temp_dir + "/"):
        return source[len(temp_dir) + 1 :]
    return "torch/" + source.lstrip("/")


@pytest.fixture(scope="module")
def cluster(on_multi_node, tmp_path_factory):
    """The shared three-node cluster, and this module's root for torch traces (collect's `--allow-dir`)."""
    return on_multi_node, str(tmp_path_factory.mktemp("traces"))


@pytest.fixture(scope="module")
def outputs(cluster):
    """{label: {destination below DIR/<label>: bytes}} for every node."""
    _, base = cluster
    writer = ray.remote(num_cpus=0)(write_node_outputs)
    nodes = alive_nodes()
    assert len({n.label for n in nodes}) == 3
    results = ray.get([writer.options(**pinned(n.node_id)).remote(base, i) for i, n in enumerate(nodes)])
    labels = {n.node_id: n.label for n in nodes}
    expected = {}
    for result in results:
        files = {
            expected_destination(src, os.path.realpath(result["temp_dir"])): data
            for src, data in result["files"].items()
        }
        expected[labels[result["node_id"]]] = files
    return expected


def assert_collected(to: Path, expected: dict[str, dict[str, bytes]], labels=None) -> None:
    for label in labels or expected:
        for dest, data in expected[label].items():
            assert (to / label / dest).read_bytes() == data, f"{label}/{dest}"


@pytest.fixture(scope="module")
def first(cluster, outputs, tmp_path_factory):
    """The first collect into a fresh directory, with its progress reports."""
    to = tmp_path_factory.mktemp("collect") / "out"
    seen = []
    _, base = cluster
    result = C.collect(to, chunk_size=CHUNK, allow_dirs=[base], progress=lambda done, total: seen.append((done, total)))
    return to, result, seen


def test_collect_copies_every_file_from_every_node(outputs, first):
    to, result, seen = first
    assert result.ok and result.exit_code == 0, result.to_json()
    assert_collected(to, outputs)
    assert len(result.copied) == sum(len(files) for files in outputs.values())
    assert not any(STALE_SESSION in c.path for c in result.copied)
    assert any(c.size > 2 * CHUNK for c in result.copied)
    assert seen[-1][0] == seen[-1][1] == result.bytes_copied
    assert sorted(m["path"] for m in result.missing) == [f"/nonexistent/{i}.json" for i in range(3)]
    assert not list(to.rglob("*" + S.PART_SUFFIX))
    index = json.loads((to / INDEX_NAME).read_text())["files"]
    assert set(index) == {c.path for c in result.copied}


def run_args(to, **options) -> argparse.Namespace:
    values = {"address": None, "json": True, "session": None, "all_sessions": False, "allow_dir": []}
    return argparse.Namespace(to=str(to), **{**values, **options})


def test_second_collect_copies_nothing_and_prints_json(cluster, first, capsys):
    to, result, _ = first
    assert collect_command.run(run_args(to, allow_dir=[cluster[1]])) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and len(data["nodes"]) == 3
    assert data["copied"] == [] and data["failed"] == []
    assert len(data["skipped"]) == len(result.copied)


def test_modified_file_is_copied_again(cluster, outputs, first):
    to, result, _ = first
    big = next(e for e in result.copied if e.path.endswith("big.nsys-rep"))
    source = json.loads((to / INDEX_NAME).read_text())["files"][big.path]["source"]
    changed = os.urandom(big.size)
    Path(source).write_bytes(changed)
    outputs[big.node][big.path.removeprefix(big.node + "/")] = changed

    again = C.collect(to, chunk_size=CHUNK, allow_dirs=[cluster[1]])
    assert [c.path for c in again.copied] == [big.path]
    assert (to / big.path).read_bytes() == changed


def test_without_index_files_already_there_are_compared_by_hash(cluster, outputs, first):
    to, result, _ = first
    (to / INDEX_NAME).unlink()
    again = C.collect(to, chunk_size=CHUNK, allow_dirs=[cluster[1]])
    assert again.ok and again.copied == []
    assert len(again.skipped) == len(result.copied)
    assert_collected(to, outputs)


def test_unwritable_destination_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(BadInput, match=str(blocker / "out")):
        collect_command.run(run_args(blocker / "out"))


def test_unreachable_cluster_fails_fast_with_exit_2(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "nrlprof.cli", "collect", "--to", str(tmp_path / "out"), "--address"]
    started = time.monotonic()
    done = subprocess.run([*argv, f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "no Ray cluster reachable" in done.stderr
    assert time.monotonic() - started < 30


def test_node_dying_during_collect_is_reported_and_others_collected(cluster, outputs, tmp_path):
    """A node of this test's own, with outputs like the others', dies after the listing."""
    multi, base = cluster
    victim = multi.add_node()
    writer = ray.remote(num_cpus=0)(write_node_outputs)
    ray.get(writer.options(**pinned(victim.node_id)).remote(base, len(outputs)))
    victim_label = next(n.label for n in alive_nodes() if n.node_id == victim.node_id)

    def kill_node(listings):
        assert {listing.node.label for listing in listings} == {*outputs, victim_label}
        multi.cluster.remove_node(victim)

    result = C.collect(
        tmp_path / "out", chunk_size=CHUNK, allow_dirs=[cluster[1]], read_timeout_s=60, after_listing=kill_node
    )

    assert result.exit_code == 1
    assert [e.node for e in result.node_errors] == [victim_label]
    assert victim_label in result.node_errors[0].reason and "died or left the cluster" in result.node_errors[0].reason
    assert {f.node for f in result.failed} == {victim_label}
    assert_collected(tmp_path / "out", outputs)
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file() and victim_label in p.parts]


def write_big_report(size: int) -> str:
    path = Path(ray._private.worker._global_node.get_session_dir_path(), "logs", "nsight", "late.nsys-rep")
    path.write_bytes(os.urandom(size))
    return str(path)


def test_node_dying_mid_file_leaves_no_partial_file(cluster, first):
    """A node of this test's own dies while its new report is streaming; the others' files are already there."""
    multi, _ = cluster
    victim = multi.add_node()
    to, _, _ = first
    writer = ray.remote(num_cpus=0)(write_big_report)
    source = ray.get(writer.options(**pinned(victim.node_id)).remote(40 * CHUNK))
    killed = []

    def kill_after_first_chunk(done: int, total: int) -> None:
        if not killed:
            killed.append(done)
            multi.cluster.remove_node(victim)

    result = C.collect(
        to, chunk_size=CHUNK, depth=2, allow_dirs=[cluster[1]], read_timeout_s=60, progress=kill_after_first_chunk
    )

    assert result.exit_code == 1 and killed
    [error] = result.node_errors
    assert source in error.reason and "died or left the cluster" in error.reason
    assert [f.path.rsplit("/", 1)[-1] for f in result.failed] == ["late.nsys-rep"]
    assert not [p for p in to.rglob("late.nsys-rep*")]
    assert result.copied == [] and result.skipped
