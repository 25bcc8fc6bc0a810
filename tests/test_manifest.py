"""The manifest README promises: one JSON line per window under `logs/nrlprof/manifest-<host>-<pid>.jsonl`,
read back with torn lines skipped."""

from __future__ import annotations

import json
import os
import socket

from nrlprof.manifest import NOT_JSON, NOT_UTF8, WindowRecord, append_record, parse_line, read_records


def test_each_window_appends_one_line_named_after_host_and_pid(tmp_path):
    first = WindowRecord("torch", "dtensor_policy_worker", 1, [3, 4], "3-4", files=["/t/a.pt.trace.json"])
    second = WindowRecord("nsys", "dtensor_policy_worker", 1, [10], "10", status="missing")
    path = append_record(tmp_path / "logs" / "nrlprof", first)
    assert append_record(tmp_path / "logs" / "nrlprof", second) == path
    assert path == tmp_path / "logs" / "nrlprof" / f"manifest-{socket.gethostname()}-{os.getpid()}.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    records = [json.loads(line) for line in lines]
    assert [(r["backend"], r["steps"], r["window"], r["status"]) for r in records] == [
        ("torch", [3, 4], "3-4", "ok"),
        ("nsys", [10], "10", "missing"),
    ]
    assert records[0]["files"] == ["/t/a.pt.trace.json"] and records[1]["files"] == []
    assert {r["worker"] for r in records} == {"dtensor_policy_worker"} and {r["rank"] for r in records} == {1}
    assert {r["pid"] for r in records} == {os.getpid()} and {r["host"] for r in records} == {socket.gethostname()}
    assert read_records(path) == records


def test_torn_and_foreign_lines_are_skipped(tmp_path):
    path = tmp_path / "manifest-h-1.jsonl"
    good = json.dumps({"backend": "torch", "steps": [2]})
    path.write_bytes(b"\n".join([good.encode(), b'{"backend": "tor', b"\xff\xfe", b"[1, 2]", b'"text"', good.encode()]))
    assert read_records(path) == [{"backend": "torch", "steps": [2]}] * 2


def test_one_parser_for_a_manifest_line_says_why_a_line_is_no_record():
    assert parse_line(b'{"backend": "torch"}\n') == {"backend": "torch"}
    assert parse_line(b"\xff\xfe\n") == NOT_UTF8
    assert parse_line(b'{"backend": "tor') == NOT_JSON
    assert parse_line(b"[" * 100_000 + b"]" * 100_000) == NOT_JSON  # nested too deep for json
    assert parse_line(b"[1, 2]") == "line is a JSON list, not an object"
