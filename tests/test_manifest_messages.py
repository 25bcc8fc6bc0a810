"""A window's message reaches the reader: joined with the late note, and shown for files written ok."""

from __future__ import annotations

from pathlib import Path

from nrlprof.backends.base import Backend, ProcessRole
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.manifest import WindowRecord, append_record
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.manifests import read_manifests
from nrlprof.workers.identity import WorkerIdentity

LATE = "window actions reached this worker late (it was busy): the trace may miss work"


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
    notes = read_manifests(find_inputs([tmp_path])).notes
    assert len(notes) == 1, notes
    assert notes[0].startswith("policy rank 0 window 2-3 (torch,") and notes[0].endswith(": ok: 1 name escaped")
