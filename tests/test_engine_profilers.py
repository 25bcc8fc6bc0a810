"""An engine's own torch profiler is driven only where that engine says it is switched on: vLLM 0.16+ by its
engine's `profiler_config`, older vLLM by VLLM_TORCH_PROFILER_DIR, SGLang by SGLANG_TORCH_PROFILER_DIR (passed as
`output_dir`). Elsewhere, and where `start_profile()` fails, the worker's child processes keep nrlprof's torch
actions. The engines here are stand-ins with the real classes' module names, attributes and method signatures
(the real vLLM engine is tested in tests/on_vllm/), but for the last test: SGLang's own switch code, from its
wheel."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import MEMORY, TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.runtime.children import engine_profilers
from nrlprof.runtime.children.engine_switches import EngineSwitches
from nrlprof.runtime.windows.profiler import PREPARE, START, STEP, STOP, Action
from nrlprof.workers.identity import WorkerIdentity

WINDOW = (2, 3)
REFUSAL = "Profiling is not enabled. Please set --profiler-config to enable profiling."


class VllmLLM:
    """vLLM 0.32's `LLM`: its config under `llm_engine.vllm_config`; `start_profile` refuses without a profiler."""

    __module__ = "vllm.entrypoints.llm"

    def __init__(self, profiler_config: dict | None) -> None:
        settings = SimpleNamespace(**{"profiler": None, "torch_profiler_dir": "", **(profiler_config or {})})
        self.llm_engine = SimpleNamespace(vllm_config=SimpleNamespace(profiler_config=settings))
        self.calls: list[tuple[str, str | None]] = []

    def start_profile(self, profile_prefix: str | None = None, *, delay_iterations=None, max_iterations=None):
        if self.llm_engine.vllm_config.profiler_config.profiler is None:
            raise RuntimeError(REFUSAL)
        self.calls.append(("start", profile_prefix))

    def stop_profile(self) -> None:
        self.calls.append(("stop", None))
        directory = self.llm_engine.vllm_config.profiler_config.torch_profiler_dir
        Path(directory, f"{self.calls[-2][1]}_dp0_pp0_tp0.pt.trace.json.gz").write_text("{}")


class OldVllmLLM:
    """vLLM before 0.16: no `profiler_config` in its config; `start_profile()` takes no argument."""

    __module__ = "vllm.entrypoints.llm"

    def __init__(self) -> None:
        self.llm_engine = SimpleNamespace(vllm_config=SimpleNamespace(model_config=None))
        self.calls: list[str] = []

    def start_profile(self) -> None:
        self.calls.append("start")

    def stop_profile(self) -> None:
        self.calls.append("stop")


class SglangEngine:
    """SGLang 0.5.23's `Engine.start_profile(**kwargs)` (fields of its `ProfileReq`)."""

    __module__ = "sglang.srt.entrypoints.engine"

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def start_profile(self, **kwargs) -> None:
        self.calls.append(kwargs)

    def stop_profile(self) -> None:
        Path(self.calls[-1]["output_dir"], f"{self.calls[-1]['profile_prefix']}-TP-0.trace.json.gz").write_text("{}")


def switches(tmp_path: Path) -> tuple[EngineSwitches, list]:
    plan = Plan(
        backends=(BackendPlan(TORCH, (Target("*"),), StepSelection((Window(*WINDOW),))),),
        torch=TorchSettings(directory=str(tmp_path / "traces")),
    )
    role = ProcessRole(WorkerIdentity("VllmGenerationWorker", None, 0), plan, None)
    written: list = []
    return EngineSwitches(role, written.append), written


def window_actions() -> list[tuple[Action, ...]]:
    first, last = WINDOW
    torch_action = lambda op, step: Action(TORCH, op, first, last, step)  # noqa: E731
    memory_start = Action(MEMORY, START, first, last, first)
    return [
        (torch_action(PREPARE, first - 1),),
        (torch_action(START, first), memory_start),
        (torch_action(STEP, last),),
        (torch_action(STOP, last + 1), Action(MEMORY, STOP, first, last, last + 1)),
    ]


def run_window(engines: EngineSwitches, worker: object) -> tuple[list[dict], list[Action]]:
    records: list[dict] = []
    for_children: list[Action] = []
    for actions in window_actions():
        written, passed = engines.apply(worker, actions)
        records += [record.as_dict() for record in written]
        for_children += passed
    return records, for_children


def test_vllm_profiler_config_torch_is_driven_and_the_children_stand_down_in_that_window(tmp_path):
    engine_dir = tmp_path / "vllm"
    engine_dir.mkdir()
    worker = SimpleNamespace(llm=VllmLLM({"profiler": "torch", "torch_profiler_dir": str(engine_dir)}))
    engines, written = switches(tmp_path)
    records, for_children = run_window(engines, worker)

    assert worker.llm.calls[0] == ("start", "vllm_generation_worker.rank0.steps2-3")
    assert [a.kind for a in for_children] == [MEMORY, MEMORY], "no torch action reaches the engine's processes"
    (record,) = records
    assert (record["worker"], record["status"], record["steps"]) == ("vllm_generation_worker.vllm_llm", "ok", [2, 3])
    assert "profiler_config" in record["message"] and record["files"][0].startswith(str(engine_dir))
    assert written[0].status == "ok"


def test_vllm_without_profiler_config_is_not_stood_down_to_even_with_the_old_variable_set(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("VLLM_TORCH_PROFILER_DIR", str(tmp_path / "ignored"))
    worker = SimpleNamespace(llm=VllmLLM(None))
    engines, _ = switches(tmp_path)
    with caplog.at_level(logging.INFO, logger="nrlprof"):
        records, for_children = run_window(engines, worker)

    assert worker.llm.calls == [], "vLLM's refusing switch is never called"
    assert records == []
    assert [a.op for a in for_children if a.kind == TORCH] == [PREPARE, START, STEP, STOP]
    (said,) = [r.getMessage() for r in caplog.records if "VLLM_TORCH_PROFILER_DIR" in r.getMessage()]
    assert "--profiler-config" in said and "records the engine's processes itself" in said


def test_a_refused_start_leaves_the_window_to_nrlprofs_own_profiler(tmp_path):
    class Refusing(VllmLLM):
        __module__ = VllmLLM.__module__

        def start_profile(self, profile_prefix=None, **_):
            raise RuntimeError(REFUSAL)

    worker = SimpleNamespace(llm=Refusing({"profiler": "torch", "torch_profiler_dir": str(tmp_path)}))
    engines, _ = switches(tmp_path)
    records, for_children = run_window(engines, worker)

    assert [a.op for a in for_children if a.kind == TORCH] == [START, STEP, STOP], "prepared for the engine, then not"
    (record,) = records
    assert record["status"] == "skipped" and REFUSAL in record["message"]
    assert "nrlprof's own torch profiler recorded" in record["message"]


def test_vllm_before_0_16_reads_its_variable(tmp_path, monkeypatch):
    engine_dir = tmp_path / "old"
    engine_dir.mkdir()
    monkeypatch.setenv("VLLM_TORCH_PROFILER_DIR", str(engine_dir))
    worker = SimpleNamespace(rollout=SimpleNamespace(inference_engine=OldVllmLLM()))
    engines, _ = switches(tmp_path)
    records, for_children = run_window(engines, worker)

    assert worker.rollout.inference_engine.calls == ["start", "stop"]
    assert [a.kind for a in for_children] == [MEMORY, MEMORY]
    assert records[0]["status"] == "missing" and "VLLM_TORCH_PROFILER_DIR" in records[0]["message"]


@pytest.mark.parametrize("profiler", ["cuda", None])
def test_vllm_profilers_other_than_torch_leave_torch_windows_to_nrlprof(tmp_path, profiler):
    worker = SimpleNamespace(llm=VllmLLM({"profiler": profiler}))
    engines, _ = switches(tmp_path)
    records, for_children = run_window(engines, worker)
    assert records == [] and len([a for a in for_children if a.kind == TORCH]) == 4


def test_sglang_is_driven_with_its_directory_as_output_dir_only_where_its_variable_is_set(tmp_path, monkeypatch):
    engine_dir = tmp_path / "sglang"
    engine_dir.mkdir()
    worker = SimpleNamespace(engine=SglangEngine())
    engines, _ = switches(tmp_path)
    assert run_window(engines, worker)[0] == [] and worker.engine.calls == []

    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(engine_dir))
    records, for_children = run_window(engines, worker)
    assert worker.engine.calls == [
        {"output_dir": str(engine_dir), "profile_prefix": "vllm_generation_worker.rank0.steps2-3"}
    ]
    assert [a.kind for a in for_children] == [MEMORY, MEMORY]
    assert records[0]["status"] == "ok" and records[0]["worker"] == "vllm_generation_worker.sglang_engine"


def test_an_async_engines_coroutine_switch_is_not_stood_down_to(tmp_path):
    class AsyncLLM(VllmLLM):
        __module__ = "vllm.v1.engine.async_llm"

        async def start_profile(self, profile_prefix=None, **_):  # AsyncLLM's switch is a coroutine
            self.calls.append(("start", profile_prefix))

    worker = SimpleNamespace(llm=AsyncLLM({"profiler": "torch", "torch_profiler_dir": str(tmp_path)}))
    engines, _ = switches(tmp_path)
    records, for_children = run_window(engines, worker)
    assert [a.op for a in for_children if a.kind == TORCH] == [START, STEP, STOP]
    assert records[0]["status"] == "skipped" and "coroutine" in records[0]["message"]


def test_profile_prefix_keeps_to_the_engines_characters():
    assert engine_profilers.profile_prefix("worker_dict-actor_rollout", 3, "2-3") == (
        "worker_dict-actor_rollout.rank3.steps2-3"
    )
    assert engine_profilers.profile_prefix("_a b:c", None, "5") == "a_b_c.rank0.steps5"
    assert len(engine_profilers.profile_prefix("w" * 300, 0, "1")) == engine_profilers.PREFIX_LENGTH


SGLANG_WHEELS = sorted((Path(__file__).parent.parent / ".sglang-wheel").glob("sglang-0.5.23-*.whl"))


class SglangTokenizerManagerStoodIn:
    """What SGLang's tokenizer manager and scheduler do with the request: start on it, and at stop write the
    trace where SGLang's ProfilerManager writes it, `<output_dir>/<profile_prefix>-<profile_id>-TP-0.trace.json.gz`
    (output_dir None: SGLANG_TORCH_PROFILER_DIR, else /tmp)."""

    def __init__(self) -> None:
        self.requests: list = []

    async def start_profile(self, req=None) -> None:
        self.requests.append(req)

    async def stop_profile(self) -> None:
        import os

        req = self.requests[-1]
        directory = Path(req.output_dir or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp"))
        prefix = f"{req.profile_prefix}-" if req.profile_prefix else ""
        (directory / f"{prefix}1764270000.0-TP-0.trace.json.gz").write_bytes(b"")


def real_sglang_engine_class(wheel: Path) -> type:
    """SGLang 0.5.23's own `Engine.start_profile`/`stop_profile` and the `ProfileReq` they build (a msgspec Struct:
    a keyword that is not one of its fields is refused), compiled from the wheel's source."""
    import ast
    import enum
    import typing
    import zipfile

    import msgspec

    with zipfile.ZipFile(wheel) as archive:
        engine_source = archive.read("sglang/srt/entrypoints/engine.py").decode()
        io_struct_source = archive.read("sglang/srt/managers/io_struct.py").decode()
    io_classes = {node.name: node for node in ast.parse(io_struct_source).body if isinstance(node, ast.ClassDef)}
    (engine,) = (
        node for node in ast.parse(engine_source).body if isinstance(node, ast.ClassDef) and node.name == "Engine"
    )
    switch = [node for node in engine.body if isinstance(node, ast.FunctionDef) and node.name.endswith("_profile")]
    assert sorted(node.name for node in switch) == ["start_profile", "stop_profile"]
    namespace = {"msgspec": msgspec, "Enum": enum.Enum, "Optional": typing.Optional, "List": list,
                 "msgspec_struct_pydantic_core_schema": None}  # fmt: skip
    wanted = [io_classes[name] for name in ("BaseReq", "ProfileReqType", "ProfileReq")]
    for source_name, nodes in (("io_struct.py", wanted), ("engine.py", switch)):
        exec(compile(ast.Module(nodes, []), source_name, "exec", dont_inherit=True), namespace)
    methods = {node.name: namespace[node.name] for node in switch}
    return type("Engine", (), {"__module__": "sglang.srt.entrypoints.engine", **methods})


@pytest.mark.framework
@pytest.mark.skipif(not SGLANG_WHEELS, reason="SGLang's wheel is downloaded by scripts/setup-venv")
def test_sglangs_own_start_profile_takes_what_nrlprof_passes_and_writes_where_nrlprof_looks(tmp_path, monkeypatch):
    """SGLang 0.5.23 cannot be installed here (it pins torch 2.14.1 and CUDA-only packages): its own code on the
    switch's path runs, from its wheel; the tokenizer manager behind it is stood in."""
    import asyncio

    engine_dir = tmp_path / "sglang"
    engine_dir.mkdir()
    engine = real_sglang_engine_class(SGLANG_WHEELS[-1])()
    engine.loop, engine.tokenizer_manager = asyncio.new_event_loop(), SglangTokenizerManagerStoodIn()
    worker = SimpleNamespace(engine=engine)
    engines, _ = switches(tmp_path)
    assert run_window(engines, worker)[0] == [] and engine.tokenizer_manager.requests == []

    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(engine_dir))
    records, for_children = run_window(engines, worker)
    (request,) = engine.tokenizer_manager.requests
    assert type(request).__name__ == "ProfileReq" and request.req_type.name == "START_PROFILE"
    assert (request.output_dir, request.profile_prefix) == (str(engine_dir), "vllm_generation_worker.rank0.steps2-3")
    assert [a.kind for a in for_children] == [MEMORY, MEMORY], "no torch action reaches the engine's processes"
    (record,) = records
    assert (record["worker"], record["status"], record["steps"]) == ("vllm_generation_worker.engine", "ok", [2, 3])
    assert [Path(f).name for f in record["files"]] == [
        "vllm_generation_worker.rank0.steps2-3-1764270000.0-TP-0.trace.json.gz"
    ]
    engine.loop.close()
