"""AReaL's own profiling settings -> backends of a Plan, meaning what AReaL's docs say they mean.

AReaL counts global steps from 0 (`for global_step in range(start_step, max_steps)`), and so do its step lists.

- `perf_tracer.profile_steps` (with `perf_tracer.enabled`): the global steps at which PyTorch's profiler runs in the
  processes the perf tracer traces, the trainer (`master`) and each role it is configured for (actor, critic, ref,
  rollout, eval-rollout): nrlprof's torch backend on those roles and the controller, one window per run of
  consecutive steps, its traces beside AReaL's perf traces (`{fileroot}/logs/{user}/{experiment}/{trial}/perf_tracer/`).
  The perf tracer's own spans go on as AReaL writes them.
- `memory_profiler.profile_steps` (AReaL's default `[0, 1]`) with `max_entries`: CUDA memory history of the actor's
  workers at those steps, dumped under `{log dir}/memory_snapshots/` (AReaL's Megatron engine only; nrlprof's
  memory backend, any engine).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nrlprof.config.fragment import Fragment
from nrlprof.config.memory import DEFAULT_MAX_ENTRIES, memory_options, parse_max_entries
from nrlprof.config.plan import MEMORY, TORCH, BackendPlan, Target
from nrlprof.config.readers import read_bool, step_list
from nrlprof.errors import ConfigError

FIRST_STEP = 0
# AReaL's memory profiler's defaults (MemoryProfilerConfig).
MEMORY_STEPS = [0, 1]


def perf_tracer_fragment(perf_tracer: Mapping | None, roles: tuple[str, ...], log_dir: str | None) -> Fragment:
    if not perf_tracer or not read_bool(perf_tracer, "enabled", False, "perf_tracer"):
        return Fragment()
    steps_given = perf_tracer.get("profile_steps")
    if not steps_given:
        return Fragment()
    steps = step_list(list(steps_given), "perf_tracer.profile_steps", first=FIRST_STEP)
    backend = BackendPlan(TORCH, tuple(Target(role) for role in roles), steps)
    torch = (("directory", os.path.join(log_dir, "perf_tracer")),) if log_dir else ()
    return Fragment((backend,), torch)


def memory_profiler_fragment(memory_profiler: Mapping | None, log_dir: str | None) -> Fragment:
    if memory_profiler is None:
        return Fragment()
    steps = step_list(list(memory_profiler.get("profile_steps", MEMORY_STEPS) or []) or None,
                      "memory_profiler.profile_steps", first=FIRST_STEP)  # fmt: skip
    if steps is None:
        return Fragment()
    entries = memory_profiler.get("max_entries", DEFAULT_MAX_ENTRIES)
    if isinstance(entries, bool) or not isinstance(entries, int):
        raise ConfigError("memory_profiler.max_entries", entries, "a whole number of allocator events")
    entries = parse_max_entries(str(entries), "memory_profiler.max_entries")
    directory = os.path.join(log_dir, "memory_snapshots") if log_dir else None
    backend = BackendPlan(MEMORY, (Target("actor"),), steps, options=memory_options(entries, False),
                          output_dir=directory, controller=False)  # fmt: skip
    return Fragment((backend,))


def areal_fragment(
    perf_tracer: Mapping | None,
    memory_profiler: Mapping | None,
    roles: tuple[str, ...],
    perf_log_dir: str | None,
    log_dir: str | None,
) -> Fragment:
    """AReaL's `perf_tracer` and `memory_profiler` sections; `roles`: those the perf tracer traces in this run; the
    log directories (`{fileroot}/logs/{user}/{experiment}/{trial}`) of the perf tracer and of the stats logger."""
    torch = perf_tracer_fragment(perf_tracer, roles, perf_log_dir)
    memory = memory_profiler_fragment(memory_profiler, log_dir)
    return Fragment(torch.backends + memory.backends, torch.torch)
