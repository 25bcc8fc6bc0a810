"""A host memory budget for profiling (NRL_PROFILE_MAX_HOST_MB), on CPU with a small budget: a torch window whose
process grows past it stops early, keeps its trace, and its record says `truncated` with the step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.finished import stop_and_finish

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.config.env import plan_from_env
from nrlprof.config.host_budget import MIN_DEFAULT_MB, NODE_SHARE, host_budget_mb
from nrlprof.config.plan import Plan
from nrlprof.config.steps import Window
from nrlprof.errors import ConfigError
from nrlprof.workers.identity import WorkerIdentity

TORCH = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "2:6"}


def test_the_budget_is_the_setting_or_a_share_of_the_node(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       2147483648 kB\nMemFree: 1 kB\n")  # 2 TB
    assert host_budget_mb(None, str(meminfo)) == 2 * 1024 * 1024 // NODE_SHARE == 65536
    meminfo.write_text("MemTotal:       8388608 kB\n")  # 8 GB: its share is below the floor
    assert host_budget_mb(None, str(meminfo)) == MIN_DEFAULT_MB
    assert host_budget_mb(300, str(meminfo)) == 300 and host_budget_mb(0, str(meminfo)) is None
    assert plan_from_env({**TORCH, "NRL_PROFILE_MAX_HOST_MB": "off"}).max_host_mb == 0
    plan = plan_from_env({**TORCH, "NRL_PROFILE_MAX_HOST_MB": " 512 "})
    assert plan.max_host_mb == 512 and Plan.from_json(plan.to_json()).max_host_mb == 512


@pytest.mark.parametrize("text", ["-1", "12.5", "lots", "9" * 20])
def test_a_bad_budget_is_one_config_error_naming_the_variable(text):
    with pytest.raises(ConfigError) as caught:
        plan_from_env({**TORCH, "NRL_PROFILE_MAX_HOST_MB": text})
    assert "NRL_PROFILE_MAX_HOST_MB" in str(caught.value)


def test_a_window_past_its_budget_stops_early_keeps_its_trace_and_says_truncated(tmp_path, fresh_nrlprof, caplog):
    import logging

    import torch

    plan = plan_from_env({**TORCH, "NRL_TORCH_PROFILE_DIR": str(tmp_path), "NRL_PROFILE_MAX_HOST_MB": "64"})
    role = ProcessRole(WorkerIdentity("DTensorPolicyWorker", None, 0), plan, None)
    backend = TorchBackend(plan.backend("torch"), role)
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("nrlprof").addHandler(handler)
    kept = []
    try:
        backend.prepare_window(Window(2, 5))
        for step in range(2, 6):
            (backend.start_window(Window(2, 5), step) if step == 2 else backend.mark_step(step))
            with torch.profiler.record_function(f"policy.train.{step}"):
                torch.ones(64, 64) @ torch.ones(64, 64)
            if step == 3:
                kept.append(bytearray(96 << 20))  # the process grows past its 64 MB in step 3
                kept[-1][::4096] = b"x" * len(kept[-1][::4096])
        record = stop_and_finish(backend)
    finally:
        logging.getLogger("nrlprof").removeHandler(handler)
    assert record.status == "truncated" and record.steps == (2, 3)
    assert record.message.startswith("stopped early at step 4: the process grew by ")
    assert "past its host budget of 64 MB (NRL_PROFILE_MAX_HOST_MB)" in record.message
    (trace,) = record.files
    events = json.loads(Path(trace).read_text())["traceEvents"]
    steps = {e["name"] for e in events if str(e.get("name", "")).startswith("policy.train.")}
    assert steps == {"policy.train.2", "policy.train.3"}
    assert len([m for m in said if "stopped early" in m]) == 1


def test_plan_estimates_a_torch_windows_host_memory_from_the_switches_and_the_steps():
    from nrlprof.tools.plan.overview import torch_switches

    plain = torch_switches(plan_from_env({**TORCH, "NRL_PROFILE_MAX_HOST_MB": "2048"}))["host_memory"]
    assert (plain["window_steps"], plain["budget_mb"]) == (4, 2048)
    assert plain["window_mb"] == round(plain["per_step_mb"] * 4) and plain["basis"].startswith("stated: ")
    shapes = {**TORCH, "NRL_TORCH_PROFILE_RECORD_SHAPES": "1", "NRL_TORCH_PROFILE_WITH_STACK": "1"}
    heavy = torch_switches(plan_from_env(shapes))["host_memory"]
    assert heavy["per_step_mb"] > 2 * plain["per_step_mb"]
