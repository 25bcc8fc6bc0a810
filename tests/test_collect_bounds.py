"""`nrlprof collect` stays in its bounds and survives bad manifests, on a real multi-node Ray cluster.

Each case builds its own fake session dir on the head node and is collected with `--session` alone, so the cases
do not see each other's files.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from nrlprof.tools.cluster import BadInput, alive_nodes, label_nodes, node_dir_name
from nrlprof.tools.collect import collector as C

OTHER_UID = 65534  # nobody


@pytest.fixture(scope="module")
def cluster(on_multi_node, tmp_path_factory):
    """The shared multi-node cluster's head (where the cases' session dirs go) and a root of this module's own."""
    head = next(n for n in alive_nodes() if n.node_id == on_multi_node.head)
    base = Path(os.path.realpath(tmp_path_factory.mktemp("bounds")))
    yield {"base": base, "head_temp": on_multi_node.temp_dirs[on_multi_node.head], "label": head.label}


counter = iter(range(1, 1000))


@pytest.fixture
def session(cluster):
    """A new session dir on the head node with logs/nsight and logs/nrlprof, and an allowed root for traces."""
    name = f"session_2030-01-01_00-00-{next(counter):02d}_000000_1"
    path = cluster["head_temp"] / name
    (path / "logs" / "nsight").mkdir(parents=True)
    (path / "logs" / "nrlprof").mkdir()
    allowed = cluster["base"] / f"allowed-{name}"
    allowed.mkdir()
    yield {"name": name, "path": path, "allowed": allowed, "label": cluster["label"], "base": cluster["base"]}
    shutil.rmtree(path, ignore_errors=True)


def write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def manifest(session: dict, lines: list[bytes], name: str = "manifest-host-1.jsonl") -> Path:
    return write(session["path"] / "logs" / "nrlprof" / name, b"".join(line + b"\n" for line in lines))


def record(*files: str, backend: str = "torch") -> bytes:
    return json.dumps({"backend": backend, "worker": "policy", "rank": 0, "files": list(files)}).encode()


def run(session: dict, to: Path, **options) -> C.CollectResult:
    return C.collect(to, session=session["name"], allow_dirs=[str(session["allowed"])], **options)


def copied_names(result: C.CollectResult) -> list[str]:
    return sorted(Path(c.path).name for c in result.copied)


def reasons(result: C.CollectResult) -> dict[str, str]:
    return {Path(item["path"]).name: item["reason"] for item in result.rejected}


def test_a_planted_manifest_cannot_reach_files_outside_the_allowed_dirs(session, tmp_path):
    secret = write(session["base"] / "secret" / "key.pem", b"root only", 0o600)
    trace = write(session["allowed"] / "policy" / "0" / "policy.rank0.steps1-2.7.pt.trace.json", b"{}", 0o640)
    manifest(session, [record(str(secret), str(trace))])

    result = run(session, tmp_path / "out")

    assert copied_names(result) == ["manifest-host-1.jsonl", trace.name]
    assert "outside the session dir" in reasons(result)["key.pem"]
    assert result.exit_code == 1
    assert not list((tmp_path / "out").rglob("key.pem"))
    copy = next((tmp_path / "out").rglob(trace.name))
    assert stat.S_IMODE(copy.stat().st_mode) == 0o640  # the source's mode, not the umask's


def test_the_source_mode_is_kept(session, tmp_path):
    private = write(session["path"] / "logs" / "nsight" / "private.nsys-rep", b"p" * 100, 0o600)
    shared = write(session["path"] / "logs" / "nsight" / "shared.nsys-rep", b"s" * 100, 0o644)

    result = run(session, tmp_path / "out")

    assert result.ok, result.to_json()
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").rglob("*.nsys-rep")}
    assert modes == {private.name: 0o600, shared.name: 0o644}


def test_symlinked_dirs_and_files_are_never_followed(session, tmp_path):
    outside = session["base"] / "outside"
    write(outside / "nsight" / "stolen.nsys-rep", b"x")
    write(outside / "secret.txt", b"s")
    rocprof = session["path"] / "logs" / "rocprof_sys"
    rocprof.symlink_to(outside / "nsight")
    nsight = session["path"] / "logs" / "nsight"
    (nsight / "link.nsys-rep").symlink_to(outside / "secret.txt")
    (nsight / "subdir").symlink_to(outside)
    write(nsight / "real.nsys-rep", b"r")
    # A manifest naming a file under an allowed root, but through a link inside it that leads out of it.
    (session["allowed"] / "via").symlink_to(outside)
    manifest(session, [record(str(session["allowed"] / "via" / "secret.txt"))])

    result = run(session, tmp_path / "out")

    assert copied_names(result) == ["manifest-host-1.jsonl", "real.nsys-rep"]
    why = reasons(result)
    assert "symbolic link" in why["rocprof_sys"] and "symbolic link" in why["link.nsys-rep"]
    assert "symbolic link" in why["subdir"] and "secret.txt" in why
    assert result.exit_code == 1


def test_symlinked_logs_dir_is_not_followed(session, tmp_path):
    outside = session["base"] / "outside-logs"
    write(outside / "nsight" / "stolen.nsys-rep", b"x")
    shutil.rmtree(session["path"] / "logs")
    (session["path"] / "logs").symlink_to(outside)

    result = run(session, tmp_path / "out")

    assert result.copied == [] and "symbolic link" in reasons(result)["logs"]


def test_malformed_manifests_are_skipped_line_by_line(session, tmp_path):
    traces = [write(session["allowed"] / f"t{i}.pt.trace.json", b"{}") for i in range(3)]
    manifest(
        session,
        [
            b'{"backend": "torch", "files": ["\xff\xfe"]}',  # not UTF-8
            b"[1, 2]",  # not an object
            b'{"backend": "torch", "files": 5}',
            json.dumps({"backend": "torch", "files": [str(traces[0]) + "\0x"]}).encode(),  # NUL in a path
            record(str(traces[0])),
        ],
    )
    (session["path"] / "logs" / "nrlprof" / "manifest-dir-2.jsonl").mkdir()
    manifest(session, [record(str(traces[1])), record(str(traces[2]))], name="manifest-host-3.jsonl")

    result = run(session, tmp_path / "out")

    assert copied_names(result) == ["manifest-host-1.jsonl", "manifest-host-3.jsonl", *(t.name for t in traces)]
    lines = sorted(item["path"].rsplit(":", 1)[-1] for item in result.rejected if ".jsonl:" in item["path"])
    assert lines == ["1", "2", "3", "4"]
    assert "a directory" in reasons(result)["manifest-dir-2.jsonl"]
    assert result.exit_code == 1 and len(result.rejected) == 5


def test_manifests_and_sessions_of_other_users_are_not_read(session, tmp_path):
    trace = write(session["allowed"] / "t.pt.trace.json", b"{}")
    os.chown(manifest(session, [record(str(trace))]), OTHER_UID, OTHER_UID)
    manifest(session, [record(str(trace))], name="manifest-host-2.jsonl").chmod(0o666)

    result = run(session, tmp_path / "out")
    assert result.copied == [] and len(result.rejected) == 2
    assert all("another user or writable by others" in r for r in reasons(result).values())

    os.chown(session["path"], OTHER_UID, OTHER_UID)
    again = run(session, tmp_path / "again")
    assert again.copied == [] and "owned by uid 65534" in reasons(again)[session["name"]]


def test_nothing_is_written_through_links_already_in_the_target(session, tmp_path):
    write(session["path"] / "logs" / "nsight" / "a.nsys-rep", b"new report")
    write(session["path"] / "logs" / "rocprof_sys" / "b.proto", b"new trace")
    to = tmp_path / "out"
    victim_dir, victim_file = tmp_path / "victim", tmp_path / "victim.txt"
    victim_dir.mkdir()
    victim_file.write_bytes(b"untouched")
    logs = to / session["label"] / session["name"] / "logs"
    (logs / "nsight").mkdir(parents=True)
    (logs / "nsight" / "a.nsys-rep").symlink_to(victim_file)
    (logs / "rocprof_sys").symlink_to(victim_dir)

    result = run(session, to)

    assert victim_file.read_bytes() == b"untouched" and list(victim_dir.iterdir()) == []
    assert (logs / "nsight" / "a.nsys-rep").read_bytes() == b"new report"
    assert not (logs / "nsight" / "a.nsys-rep").is_symlink()
    [failed] = result.failed
    assert failed.path.endswith("b.proto") and "symbolic link" in failed.reason
    assert result.exit_code == 1


def test_node_names_never_leave_the_target():
    assert node_dir_name("..") == "node" and node_dir_name(".") == "node" and node_dir_name("a/../b") == "a_.._b"
    labels = [n.label for n in label_nodes([("id1" * 8, "..", "1.2.3.4"), ("id2" * 8, "/", "1.2.3.5")])]
    assert all("/" not in label and label not in (".", "..") for label in labels) and len(set(labels)) == 2


def test_a_bad_session_name_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="--session"):
        C.collect(tmp_path / "out", session="../etc")
