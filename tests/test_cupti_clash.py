"""NVTX_INJECTION64_PATH pointing at CUPTI where a torch window will run: `plan` and `doctor` say so, and a torch
window's process unsets it (as verl does) and says so once."""

from __future__ import annotations

import logging
import os

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.cupti_clash import NVTX_INJECTION_VARIABLE, PATCH_NAME, points_at_cupti
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.config.env import plan_from_env
from nrlprof.process import patches
from nrlprof.tools.check.doctor import WARNING, DoctorReport, NodeCheck, node_problems
from nrlprof.tools.plan.overview import overview
from nrlprof.workers.identity import WorkerIdentity

CUPTI = "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12"
TORCH = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4"}
MEMORY = {"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_MEMORY_PROFILE_STEP_RANGE": "2:4"}


def test_only_a_cupti_library_is_a_clash():
    assert points_at_cupti(CUPTI) and points_at_cupti("libcupti.so")
    assert (
        not points_at_cupti("/opt/nvtx/libnvtx_injection.so") and not points_at_cupti("") and not points_at_cupti(None)
    )


def test_plan_warns_where_a_torch_window_will_run():
    environ = {**TORCH, NVTX_INJECTION_VARIABLE: CUPTI}
    (warning,) = overview(plan_from_env(environ), environ, {}, None, "").warnings
    assert warning.startswith(f"NVTX_INJECTION64_PATH points at CUPTI ({CUPTI}): torch's profiler then records no GPU")
    assert "nrlprof unsets it in the processes of its torch windows" in warning
    assert overview(plan_from_env(MEMORY), {**MEMORY, NVTX_INJECTION_VARIABLE: CUPTI}, {}, None, "").warnings == []
    assert overview(plan_from_env(TORCH), TORCH, {}, None, "").warnings == []


def test_doctor_flags_a_node_whose_workers_start_with_it():
    report = DoctorReport(True, [], "/tmp", "3.11.7", "python")
    check = NodeCheck("node-1", "id", "10.0.0.1", "gpu-1", output_writable=True, python_version="3.11.7",
                      nvtx_injection=CUPTI)  # fmt: skip
    (problem,) = node_problems(check, plan_from_env(TORCH), report, False)
    assert (problem.severity, problem.node) == (WARNING, "node-1")
    assert "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in problem.describe()
    assert "unset NVTX_INJECTION64_PATH" in problem.fix
    assert node_problems(check, plan_from_env(MEMORY), report, False) == []


def test_a_torch_windows_process_unsets_it_says_so_once_and_the_patch_undoes_it(monkeypatch, caplog):
    monkeypatch.setenv(NVTX_INJECTION_VARIABLE, CUPTI)
    caplog.set_level(logging.DEBUG, logger="nrlprof")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("nrlprof").addHandler(handler)
    plan = plan_from_env(TORCH)
    try:
        for rank in (0, 1):  # two workers' processes: rank 0 says it, rank 1 only at DEBUG
            monkeypatch.setenv(NVTX_INJECTION_VARIABLE, CUPTI)
            role = ProcessRole(WorkerIdentity("DTensorPolicyWorker", None, rank), plan, None)
            TorchBackend(plan.backend("torch"), role)
            assert NVTX_INJECTION_VARIABLE not in os.environ
            patches.uninstall(PATCH_NAME)
            assert os.environ[NVTX_INJECTION_VARIABLE] == CUPTI, "the patch undoes it"
    finally:
        logging.getLogger("nrlprof").removeHandler(handler)
        patches.uninstall(PATCH_NAME)
    said = [r for r in records if "NVTX_INJECTION64_PATH" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO, logging.DEBUG]
    assert "nrlprof unset it in dtensor_policy_worker" in said[0].getMessage()
