"""SkyRL's own profiling settings -> backends of a Plan, meaning what SkyRL's docs say they mean.

- `trainer.policy.torch_profiler_config`: torch's profiler over the policy workers' ranks `ranks` (SkyRL's default
  `[0]`), on a `torch.profiler.schedule(skip_first, wait, warmup, active, repeat)` that SkyRL steps once per global
  step from the trainer's first step: its active steps are the windows (`skip_first` 10, `wait` 0, `warmup` 1,
  `active` 1: global step 12 of a run from step 1; `repeat` 0 repeats to the last step). Each cycle's active steps
  are one window, as each is one trace in SkyRL; traces go to `save_path`, with SkyRL's `record_shapes`,
  `profile_memory`, `with_stack`, `with_flops` and `use_gzip`. SkyRL profiles neither critic, ref, the controller nor
  the inference engines, and neither does the plan. `export_type: stacks` is left to SkyRL's own profiler.
- `trainer.policy.record_memory`: allocator history and snapshots of the policy workers, every rank, for the whole
  run, under `{trainer.ckpt_path}/memory_snapshots/` (nrlprof's memory backend: per-step figures and one snapshot per
  window; the run is one window).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nrlprof.config.fragment import Fragment
from nrlprof.config.memory import DEFAULT_MAX_ENTRIES, memory_options
from nrlprof.config.plan import MEMORY, TORCH, BackendPlan, Target
from nrlprof.config.readers import key, optional_str, rank_list, read_bool
from nrlprof.config.steps import MAX_STEP, StepSelection, Window
from nrlprof.errors import ConfigError

POLICY = "policy"
TORCH_PROFILER = "trainer.policy.torch_profiler_config"
RECORD_MEMORY = "trainer.policy.record_memory"
# SkyRL's TorchProfilerConfig defaults.
SCHEDULE_DEFAULTS = {"skip_first": 10, "wait": 0, "warmup": 1, "active": 1, "repeat": 1}
TORCH_SWITCHES = {"record_shapes": True, "profile_memory": False, "with_stack": True, "with_flops": False}
STACKS = "stacks"
# A schedule that repeats forever stops here when the run's last step is not known.
MAX_WINDOWS = 10_000


def _count(block: Mapping, name: str, path: str, least: int) -> int:
    value = block.get(name, SCHEDULE_DEFAULTS[name])
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_STEP:
        raise ConfigError(key(path, name), value, f"a whole number >= {least}, as torch.profiler.schedule takes it")
    return value


def schedule_windows(block: Mapping, path: str, first_step: int, last_step: int | None) -> StepSelection:
    """The global steps SkyRL's schedule records, one window per cycle, from the trainer's first step."""
    skip_first = _count(block, "skip_first", path, 0)
    wait, warmup = _count(block, "wait", path, 0), _count(block, "warmup", path, 0)
    active, repeat = _count(block, "active", path, 1), _count(block, "repeat", path, 0)
    cycle = wait + warmup + active
    windows = []
    start = first_step + skip_first + wait + warmup
    while (repeat == 0 or len(windows) < repeat) and len(windows) < MAX_WINDOWS and start <= MAX_STEP - active:
        if last_step is not None and start > last_step:
            break
        windows.append(Window(start, start + active - 1))
        start += cycle
    if not windows:
        raise ConfigError(path, dict(block), "a schedule that records a step of this run",
                          f"its first active step is after the run's last step {last_step}")  # fmt: skip
    return StepSelection(tuple(windows))


def _torch_switches(block: Mapping, path: str) -> tuple[tuple[str, object], ...]:
    settings: dict[str, object] = {name: read_bool(block, name, on, path) for name, on in TORCH_SWITCHES.items()}
    settings["gzip"] = read_bool(block, "use_gzip", False, path)
    directory = optional_str(block, "save_path", path)
    if directory is not None:
        settings["directory"] = directory
    return tuple(settings.items())


def torch_profiler_fragment(block: Mapping, first_step: int, last_step: int | None) -> Fragment:
    """`trainer.policy.torch_profiler_config` as a mapping (SkyRL's dataclass, as a dict)."""
    path = TORCH_PROFILER
    if not read_bool(block, "enable", False, path) or block.get("export_type") == STACKS:
        return Fragment()
    ranks = rank_list(block.get("ranks", [0]), key(path, "ranks"))
    steps = schedule_windows(block, path, first_step, last_step)
    backend = BackendPlan(TORCH, (Target(POLICY, ranks),), steps, controller=False)
    return Fragment((backend,), _torch_switches(block, path))


def record_memory_fragment(record_memory: object, ckpt_path: object, first_step: int, last_step: int | None
                           ) -> Fragment:  # fmt: skip
    if not isinstance(record_memory, bool):
        raise ConfigError(RECORD_MEMORY, record_memory, "true or false")
    if not record_memory:
        return Fragment()
    if not isinstance(ckpt_path, str) or not ckpt_path.strip():
        raise ConfigError("trainer.ckpt_path", ckpt_path, "a directory", "record_memory saves under it")
    steps = StepSelection((Window(first_step, last_step if last_step is not None else MAX_STEP),))
    directory = os.path.join(ckpt_path.strip(), "memory_snapshots")
    backend = BackendPlan(MEMORY, (Target(POLICY),), steps, options=memory_options(DEFAULT_MAX_ENTRIES, False),
                          output_dir=directory, controller=False)  # fmt: skip
    return Fragment((backend,))


def skyrl_fragment(policy: Mapping, ckpt_path: object, first_step: int, last_step: int | None) -> Fragment:
    """SkyRL's `trainer.policy` section (`torch_profiler_config`, `record_memory`) and `trainer.ckpt_path`."""
    torch = torch_profiler_fragment(dict(policy.get("torch_profiler_config") or {}), first_step, last_step)
    memory = record_memory_fragment(policy.get("record_memory", False), ckpt_path, first_step, last_step)
    return Fragment(torch.backends + memory.backends, torch.torch)
