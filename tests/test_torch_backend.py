"""The torch backend in one process with the real torch profiler: metadata Kineto keeps valid, steps, threads."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import torch
from helpers.environment import environment_without
from helpers.finished import stop_and_finish

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.workers.identity import WorkerIdentity

PROGRAMS = Path(__file__).parent / "programs"


def backend_for(name: str, directory) -> TorchBackend:
    steps = StepSelection((Window(2, 3),))
    backend_plan = BackendPlan(TORCH, (Target("*"),), steps)
    plan = Plan(backends=(backend_plan,), torch=TorchSettings(directory=str(directory)))
    role = ProcessRole(WorkerIdentity("PolicyWorker", None, 0, explicit_name=name), plan, None)
    return TorchBackend(backend_plan, role, Target("*"))


def test_worker_names_with_quotes_backslashes_and_non_ascii_keep_the_trace_valid_json(tmp_path):
    backend = backend_for('pol"icy\\wörker\nx', tmp_path)
    backend.start_window(Window(2, 3), 2)
    torch.ones(8) + 1
    backend.mark_step(3)
    record = stop_and_finish(backend)
    (path,) = record.files
    trace = json.loads(Path(path).read_text())
    assert trace["nrlprof"]["worker"] == "pol_icy_w_rker_x"
    assert trace["nrlprof"]["steps"] == [2, 3]


def test_a_window_records_ops_of_other_threads_and_only_its_steps(tmp_path):
    backend = backend_for("policy", tmp_path)
    backend.prepare_window(Window(2, 3))
    with torch.profiler.record_function("warm-up work"):
        torch.ones(8) + 1
    backend.start_window(Window(2, 3), 2)

    def other_thread_work() -> None:
        with torch.profiler.record_function("other thread"):
            torch.ones(8) + 1

    worker = threading.Thread(target=other_thread_work)
    with torch.profiler.record_function("step two work"):
        worker.start()
        worker.join()
    backend.mark_step(3)
    (path,) = stop_and_finish(backend).files
    names = {e.get("name") for e in json.loads(Path(path).read_text())["traceEvents"]}
    assert {"ProfilerStep#2", "ProfilerStep#3", "step two work", "other thread"} <= names
    assert "warm-up work" not in names, "the warm-up step before the window is not recorded"


def test_a_window_at_step_0_records_step_0_as_frameworks_that_count_from_0_number_it(tmp_path):
    """RLinf, AReaL and slime count steps from 0: a window there starts with no step before it to warm up in."""
    backend = backend_for("actor", tmp_path)
    backend.start_window(Window(0, 1), 0)
    with torch.profiler.record_function("step zero work"):
        torch.ones(8) + 1
    backend.mark_step(1)
    with torch.profiler.record_function("step one work"):
        torch.ones(8) + 1
    (path,) = stop_and_finish(backend).files
    names = {e.get("name") for e in json.loads(Path(path).read_text())["traceEvents"]}
    assert {"ProfilerStep#0", "ProfilerStep#1", "step zero work", "step one work"} <= names


def test_each_lost_thread_warning_is_logged_once_and_neither_hides_the_other(monkeypatch):
    """Memory profiling turns profile_all_threads off; a torch without it cannot turn it on: two warnings."""
    import logging

    from torch._C import _profiler

    from nrlprof.backends import torch_profiler

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    monkeypatch.setattr(torch_profiler, "_WARNED", set())
    torch_profiler.logger.addHandler(handler)
    try:
        assert torch_profiler._experimental_config(profile_memory=False) is not None  # torch 2.13 has it
        assert records == []
        for _ in range(2):
            assert torch_profiler._experimental_config(profile_memory=True).trace_only  # no all-threads; still a config

        def no_all_threads(**options):
            raise TypeError("unexpected keyword argument 'profile_all_threads'")

        monkeypatch.setattr(_profiler, "_ExperimentalConfig", no_all_threads)
        for _ in range(2):
            assert torch_profiler._experimental_config(profile_memory=False) is None
    finally:
        torch_profiler.logger.removeHandler(handler)
    assert [r.split(":")[0] for r in records] == [
        "NRL_TORCH_PROFILE_MEMORY is on",
        "this torch profiler records only the thread that starts a window (no profile_all_threads)",
    ]


def test_torch_builds_no_python_events_at_stop_unless_stacks_need_them(monkeypatch):
    """trace_only: a third of torch's stop is building events nrlprof never reads; with_stack needs them, and a
    torch without trace_only still records every thread."""
    from torch._C import _profiler

    from nrlprof.backends import torch_profiler

    real = _profiler._ExperimentalConfig
    asked: list[dict] = []
    knows_trace_only = True

    def recorded(**options):
        if "trace_only" in options and not knows_trace_only:
            raise TypeError("unexpected keyword argument 'trace_only'")
        asked.append(options)
        return real(**options)

    monkeypatch.setattr(torch_profiler, "_WARNED", set())
    monkeypatch.setattr(_profiler, "_ExperimentalConfig", recorded)

    def options(profile_memory: bool, with_stack: bool = False) -> dict | None:
        asked.clear()
        config = torch_profiler._experimental_config(profile_memory, with_stack)
        return None if config is None else asked[-1]

    assert options(False) == {"profile_all_threads": True, "trace_only": True}
    assert options(True) == {"trace_only": True}
    assert options(False, with_stack=True) == {"profile_all_threads": True}
    assert options(True, with_stack=True) is None
    knows_trace_only = False
    assert options(False) == {"profile_all_threads": True}
    assert options(True) is None
    assert real(trace_only=True).trace_only  # the option torch 2.13 reads at stop


def test_a_window_asked_for_finds_the_profiler_started_up_and_records_only_its_steps(tmp_path):
    """`ready_for_asked` (run before a window asked for is handed to the gate) pays Kineto's once-per-process
    start-up with an empty start and stop, so the window's first step does not; a profiler another party runs is left
    alone. A fresh process: this one's Kineto may have started already."""
    import subprocess
    import sys

    script = PROGRAMS / "asked_window_started_up.py"
    run = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["left_alone"] and result["started_up"], result
    names = {e.get("name") for e in json.loads(Path(result["trace"]).read_text())["traceEvents"]}
    assert {"ProfilerStep#4", "ProfilerStep#5", "in the window"} <= names
    assert "before the window" not in names


def held_warm_up(backend: TorchBackend, release: threading.Event, imported: set | None = None) -> list[int]:
    """The backend's session builds wait for `release` (at most 10 s); the threads that built them. `imported`
    gets the modules first imported while a build ran."""
    import sys

    built_on: list[int] = []
    build = backend._new_session

    def held(*args, **kwargs):
        built_on.append(threading.get_ident())
        release.wait(10)
        before = set(sys.modules)
        try:
            return build(*args, **kwargs)
        finally:
            if imported is not None:
                imported.update(set(sys.modules) - before)

    backend._new_session = held
    return built_on


def test_the_warm_up_runs_beside_the_step_before_the_window_and_the_window_takes_its_session(tmp_path):
    backend = backend_for("policy", tmp_path)
    release = threading.Event()
    imported: set[str] = set()
    built_on = held_warm_up(backend, release, imported)
    backend.prepare_window(Window(2, 3))
    returned_while_warming_up = not release.is_set()
    with torch.profiler.record_function("the step before"):
        torch.ones(8) + 1
    release.set()
    backend.start_window(Window(2, 3), 2)
    with torch.profiler.record_function("step two work"):
        torch.ones(8) + 1
    backend.mark_step(3)
    (path,) = stop_and_finish(backend).files
    assert returned_while_warming_up and backend.warm_up is None
    assert built_on and built_on[0] != threading.get_ident(), "the session is prepared on a thread of its own"
    assert len(built_on) == 1, "the window took the session warmed up for it"
    assert not imported, "imports run on the gate's thread, not beside the job's own"
    names = {e.get("name") for e in json.loads(Path(path).read_text())["traceEvents"]}
    assert {"ProfilerStep#2", "ProfilerStep#3", "step two work"} <= names
    assert "the step before" not in names


def test_a_warm_up_whose_window_never_starts_is_stopped(tmp_path):
    from nrlprof.backends.torch_guard import another_profiler_running

    backend = backend_for("policy", tmp_path)
    backend.prepare_window(Window(2, 3))
    backend.discard_prepared()
    assert backend.warm_up is None and backend.prepared_for is None
    assert not another_profiler_running()
    theirs = torch.profiler.profile()
    theirs.start()
    torch.ones(8) + 1
    theirs.stop()
    assert any(e.name == "aten::add" for e in theirs.events())


def test_a_profiler_started_by_the_job_during_the_warm_up_ends_it_and_the_window_is_skipped(tmp_path):
    """Two torch profilers in one process crash it: the job's start waits for nrlprof's warm-up and stops it."""
    from nrlprof.backends.torch_guard import PATCH_NAME
    from nrlprof.process import patches

    backend = backend_for("policy", tmp_path)
    release = threading.Event()
    held_warm_up(backend, release)
    patches.uninstall(PATCH_NAME)  # installed by an earlier test's backend: one backend per process in a job
    backend.guard.install()
    backend.prepare_window(Window(2, 3))
    threading.Timer(0.5, release.set).start()
    theirs = torch.profiler.profile()
    theirs.start()
    assert backend.warm_up is None and backend.profiler is None
    backend.start_window(Window(2, 3), 2)
    torch.ones(8) + 1
    backend.mark_step(3)
    record = stop_and_finish(backend)
    theirs.stop()
    patches.uninstall(PATCH_NAME)
    assert record.status == "skipped" and "another torch profiler" in record.message
    assert any(e.name == "aten::add" for e in theirs.events())


def test_a_drivers_window_imports_neither_ray_nor_torchs_compiler(tmp_path):
    """torch's profiler start imports `torch._inductor` (3 s of Python on 2 cores) to read one setting of a
    compiler the job never loaded; a driver without Ray had Ray imported (2 s) to list workers at its window's
    start. Neither belongs on the step path of a job that uses neither."""
    import subprocess
    import sys

    env = environment_without("NRL")
    env.update(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*none*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:4",
        NRL_TORCH_PROFILE_DIR=str(tmp_path / "torch"),
        NRL_STEP_ANATOMY_DIR=str(tmp_path / "anatomy"),
    )
    driver = [sys.executable, str(PROGRAMS / "driver_without_ray.py")]
    run = subprocess.run(driver, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"ray": False, "inductor": False}
    (trace,) = (tmp_path / "torch").rglob("*.pt.trace.json")
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert {"ProfilerStep#2", "ProfilerStep#3", "aten::add"} <= names


def test_the_compiler_stays_unimported_on_the_starting_thread_only_and_its_setting_is_read_as_inductor_reads_it(
    monkeypatch,
):
    import sys

    from nrlprof.backends.inductor_unimported import inductor_left_unimported

    class Profiler:
        has_cudagraphs = None

    lazily_imported: list[str] = []

    def lazy(name: str):
        lazily_imported.append(name)
        return "inductor"

    monkeypatch.delitem(sys.modules, "torch._inductor", raising=False)
    monkeypatch.delattr(torch, "_inductor", raising=False)
    monkeypatch.setattr(torch, "__getattr__", lazy)
    for value, expected in (("1", True), ("0", False)):
        monkeypatch.setenv("TORCHINDUCTOR_CUDAGRAPHS", value)
        profiler = Profiler()
        elsewhere: list[object] = []

        def look(found: list[object] = elsewhere) -> None:
            found.append(torch._inductor)

        with inductor_left_unimported(profiler):
            assert not hasattr(torch, "_inductor")
            thread = threading.Thread(target=look)
            thread.start()
            thread.join()
        assert elsewhere == ["inductor"], "other threads still get the module"
        assert profiler.has_cudagraphs is expected
        assert torch.__getattr__ is lazy
    assert lazily_imported == ["_inductor", "_inductor"]
    monkeypatch.setitem(sys.modules, "torch._inductor", object())
    profiler = Profiler()
    with inductor_left_unimported(profiler):
        assert torch._inductor == "inductor"
    assert profiler.has_cudagraphs is None, "a job that loaded inductor: torch reads its setting itself"
