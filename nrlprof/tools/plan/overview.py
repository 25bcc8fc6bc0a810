"""The whole of a plan beyond its backends: the step anatomy, where the steps come from, the controller, the torch
switches, the workers' interpreter, the variables nrlprof does not read and what a config file held."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.config.plan import MEMORY, NSYS, TORCH, Plan
from nrlprof.rayfix.fix import render_tool_options

WORKER_PYTHON = "<python>"
ANATOMY = (
    "every worker group's calls per step, profiled or not, from Ray's task events, recorded by the driver "
    "(a reader process beside it)"
)
INTERPRETER = (
    "each worker runs its own interpreter: its runtime_env's py_executable (a per-worker venv, `uv run ...`), "
    f"else the command Ray starts workers with; shown as {WORKER_PYTHON} in the commands (`plan --address` shows "
    "each live actor's)"
)
STEPS_EXPLICIT = "an explicit `nrlprof.step(n)` in the controller wins once it is called"
STEPS_ADAPTERS = (
    "else the framework adapters, applied when the framework's module is imported: verl's trainers "
    "(RayPPOTrainer, v1 PPOTrainer: `global_steps`), NeMo RL's `maybe_gpu_profile_step`, RLinf's runners "
    "(`global_step`, counted from 0), OpenRLHF's PPO trainer, SkyRL's trainers (`global_step`), AReaL's PPOTrainer "
    "(`global_step`, counted from 0), slime's train loop (`rollout_id`, counted from 0)"
)
# A framework mode whose workers are no Ray actors: said where the framework is installed.
AREAL_UNSEEN = (
    "AReaL is installed here: only its scheduler.type=ray makes Ray actors nrlprof profiles; scheduler.type=local "
    "and slurm start processes, and its launcher areal.infra.launcher.ray Ray tasks, which nrlprof does not see"
)
CONTROLLER = (
    "the controller is the process that steps: the driver, or a Ray actor that calls the step "
    "(verl's TaskRunner, OpenRLHF's PPO trainer)"
)
NSYS_CONTROLLER = (
    "nsys: the controller is captured only when it runs under nsys itself: a driver started as `nsys profile "
    "--capture-range=cudaProfilerApi --capture-range-end=repeat python train.py` (nrlprof opens its capture "
    "ranges with cudaProfilerStart/Stop), or a controller actor with verl's controller_nsight_options"
)


@dataclass
class PlanOverview:
    configured: bool  # `import nrlprof` has something to do in this environment
    anatomy: dict[str, Any]
    steps: list[str]
    controller: list[str]
    torch: dict[str, Any] | None
    interpreter: str = INTERPRETER
    settings: dict[str, Any] = field(default_factory=dict)
    unknown_variables: list[dict[str, str | None]] = field(default_factory=list)
    config_file: dict[str, Any] | None = None
    nsys_options_checked: str = ""
    warnings: list[str] = field(default_factory=list)  # what will go wrong where this plan runs, in plain words

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def overview(
    plan: Plan,
    environ: Mapping[str, str],
    unknown: Mapping[str, str | None],
    config_file: dict[str, Any] | None,
    nsys_checked: str,
) -> PlanOverview:
    from nrlprof.anatomy.settings import anatomy_settings
    from nrlprof.config.variables import ANATOMY_VARIABLE, may_activate

    anatomy = anatomy_settings(environ, backends_configured=plan.active)
    setting = (environ.get(ANATOMY_VARIABLE) or "").strip()
    if setting:
        why = f"{ANATOMY_VARIABLE}={setting}"
    else:
        why = "on by default: a backend is configured" if plan.active else "off by default: no backend is configured"
    return PlanOverview(
        configured=may_activate(environ) or plan.configured,
        anatomy={"enabled": anatomy.enabled, "directory": anatomy.directory, "why": why, "what": ANATOMY},
        steps=step_sources(plan),
        controller=controller_capture(plan),
        torch=torch_switches(plan),
        settings={"log_level": plan.log_level, "timeout_s": plan.timeout_s, "sources": list(plan.sources)},
        unknown_variables=[{"name": name, "closest": closest} for name, closest in sorted(unknown.items())],
        config_file=config_file,
        nsys_options_checked=nsys_checked,
        warnings=environment_warnings(plan, environ),
    )


def environment_warnings(plan: Plan, environ: Mapping[str, str]) -> list[str]:
    """This environment's settings that spoil a capture: NVTX_INJECTION64_PATH at CUPTI, where torch windows run."""
    import importlib.util

    from nrlprof.backends.cupti_clash import CLASH, cupti_injection

    warnings = [AREAL_UNSEEN] if importlib.util.find_spec("areal") is not None else []
    path = cupti_injection(environ)
    if plan.backend(TORCH) is None or path is None:
        return warnings
    return [*warnings, CLASH.format(path=path) + "; nrlprof unsets it in the processes of its torch windows (as verl "
            "does); `nrlprof doctor` checks the environment Ray workers start with on each node"]  # fmt: skip


def step_sources(plan: Plan) -> list[str]:
    """Where the steps come from, in order of precedence."""
    sources = [STEPS_EXPLICIT]
    if plan.step_method is not None:
        marker = plan.step_method
        sources.append(
            f"else the step marker NRL_STEP_METHOD={marker.text!r}: step n begins at the controller's n-th call of a "
            f"method matching {marker.method!r} on a worker matching {marker.worker!r} that follows a call of any "
            "other method"
        )
    else:
        sources.append("(no step marker: NRL_STEP_METHOD is not set)")
    sources.append(STEPS_ADAPTERS)
    if plan.framework_config:
        sources.append("NRL_PROFILE_FRAMEWORK_CONFIG=1: the workers and steps to profile come from the framework's own "
                       "profiling settings when its trainer starts (verl, RLinf, SkyRL, AReaL, slime), added to this "
                       "plan")  # fmt: skip
    return sources


def controller_capture(plan: Plan) -> list[str]:
    """Whether and how the controller is captured, per backend."""
    lines = [CONTROLLER]
    for kind, what in ((TORCH, "torch traces"), (MEMORY, "memory figures")):
        backend = plan.backend(kind)
        if backend is not None:
            captured = "captured" if backend.controller else "not captured (this backend's controller setting)"
            lines.append(f"{kind}: {what} of the controller's own windows are {captured}")
    if plan.backend(NSYS) is not None or plan.controller_nsys:
        lines.append(NSYS_CONTROLLER)
        if plan.controller_nsys:
            options = shlex.join(render_tool_options(plan.controller_nsys_options))
            lines.append(f"nsys: a controller actor runs under nsys with the controller's options: {options}")
    return lines


def torch_switches(plan: Plan) -> dict[str, Any] | None:
    if plan.backend(TORCH) is None:
        return None
    torch = plan.torch
    return {"directory": str(Path(torch.directory).expanduser().resolve()), "record_shapes": torch.record_shapes,
            "profile_memory": torch.profile_memory, "with_stack": torch.with_stack, "with_flops": torch.with_flops,
            "gzip": torch.gzip, "host_memory": host_memory_estimate(plan)}  # fmt: skip


# Host memory the torch profiler holds per recorded operator call until its window's trace is written, measured
# on CPU (torch 2.13, a step of 900 small operator calls): 0.94 MB a step with no switch, 2.25 MB with shapes,
# 1.04 MB with stacks, 2.52 MB with both, 1.14 MB with memory.
KB_PER_CALL = 1.05
KB_PER_CALL_SHAPES = 2.5
KB_PER_CALL_EXTRA = 0.25  # stacks, memory events: each
CALLS_PER_STEP = 10_000  # the step the estimate is given for: a small training step's operator calls


def host_memory_estimate(plan: Plan) -> dict[str, Any]:
    """The host memory a torch window holds per process, from the switches and the longest window, at a stated rate;
    and the budget that stops a window early (NRL_PROFILE_MAX_HOST_MB)."""
    from nrlprof.config.host_budget import host_budget_mb

    torch, backend = plan.torch, plan.backend(TORCH)
    per_call = KB_PER_CALL_SHAPES if torch.record_shapes else KB_PER_CALL
    per_call += KB_PER_CALL_EXTRA * (torch.with_stack + torch.profile_memory)
    steps = max((len(w.steps) for w in backend.steps.windows), default=1) if backend.steps is not None else 1
    per_step_mb = per_call * CALLS_PER_STEP / 1024
    return {"kb_per_operator_call": per_call, "per_step_mb": round(per_step_mb, 1), "window_steps": steps,
            "window_mb": round(per_step_mb * steps), "budget_mb": host_budget_mb(plan.max_host_mb),
            "basis": f"stated: {per_call:g} KB per operator call recorded (measured on CPU, torch 2.13), for a step "
                     f"of {CALLS_PER_STEP:,} operator calls; scale by your step's calls"}  # fmt: skip
