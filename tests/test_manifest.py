"""nrlprof.manifest, as README promises it: one JSON line per window under `logs/nrlprof/manifest-<host>-<pid>.jsonl`,
read back with torn lines skipped; a window's message reaches the reader, joined with the late note, and is shown
for files written ok."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from nrlprof.backends.base import Backend, ProcessRole
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.manifest import NOT_JSON, NOT_UTF8, WindowRecord, append_record, parse_line, read_records
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.manifests import load_manifest, manifest_view
from nrlprof.workers.identity import WorkerIdentity

LATE = "window actions reached this worker late (it was busy): the trace may miss work"


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


def backend(directory: Path) -> Backend:
    backend_plan = BackendPlan(TORCH, (Target("*"),), StepSelection((Window(2, 3),)))
    plan = Plan(backends=(backend_plan,), torch=TorchSettings(directory=str(directory)))
    role = ProcessRole(WorkerIdentity("PolicyWorker", None, 0, explicit_name="policy"), plan, None)
    return Backend(backend_plan, role, Target("*"))


def test_a_late_window_keeps_its_own_message_after_the_late_note(tmp_path):
    late = backend(tmp_path)
    late.late = True
    assert late.record([], "ok", "2 names escaped").message == f"{LATE}; 2 names escaped"
    assert late.record([], "ok").message == LATE
    assert late.record([], "ok").status == "late"
    on_time = backend(tmp_path)
    assert (on_time.record([], "ok", "2 names escaped").status, on_time.record([]).message) == ("ok", "")


def test_a_window_written_ok_with_a_message_is_a_note_and_one_without_is_not(tmp_path):
    trace = tmp_path / "policy.rank0.steps2-3.7.pt.trace.json"
    trace.write_text("{}")
    fields = {"backend": TORCH, "worker": "policy", "rank": 0, "steps": [2, 3], "window": "2-3", "files": [str(trace)]}
    append_record(tmp_path / ".manifests", WindowRecord(**fields, status="ok", message="1 name escaped"))
    append_record(tmp_path / ".manifests", WindowRecord(**{**fields, "rank": 1}, status="ok"))
    found = find_inputs([tmp_path])
    notes = manifest_view([load_manifest(path) for path in found.manifests], found.names).notes
    assert len(notes) == 1, notes
    assert notes[0].startswith("policy rank 0 window 2-3 (torch,") and notes[0].endswith(": ok: 1 name escaped")
