"""slime's own profiling switches -> backends of a Plan, meaning what slime does with them.

slime counts rollouts from 0 (`for rollout_id in range(args.start_rollout_id, args.num_rollout)`), and its train
actors step their profilers once per rollout the actor role trains, from the run's first rollout.

- `--use-pytorch-profiler` with `--profile-target train_overall` (slime's default target): the actor role's train
  actors, every rank, on `schedule(wait=start - 1, warmup=1, active=end - start)` counted from the first rollout:
  rollouts `first + --profile-step-start` to `first + --profile-step-end - 1`, one window (one trace in slime), into
  `--tensorboard-dir`. The targets `train_actor` and `train_log_probs` profile each call's micro-batches: nrlprof's
  windows are whole steps, so those are left to slime's own profiler.
- `--record-memory-history` (train_overall, `--memory-recorder torch`): the actor role's allocator history from its
  first rollout, dumped at rollout `--memory-snapshot-num-steps - 1` (and on an out-of-memory error, as slime does),
  into `--memory-snapshot-dir`; with no snapshot step, the whole run and the out-of-memory dump.
"""

from __future__ import annotations

from collections.abc import Mapping

from nrlprof.config.fragment import Fragment
from nrlprof.config.memory import DEFAULT_MAX_ENTRIES, memory_options
from nrlprof.config.plan import MEMORY, TORCH, BackendPlan, Target
from nrlprof.config.steps import MAX_STEP, StepSelection, Window
from nrlprof.errors import ConfigError

ACTOR = "actor"
OVERALL = "train_overall"
FIRST_ROLLOUT = 0


def _count(args: Mapping, name: str, least: int) -> int:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_STEP:
        raise ConfigError(f"--{name.replace('_', '-')}", value, f"a whole number >= {least}")
    return value


def torch_fragment(args: Mapping, first: int) -> Fragment:
    if not args.get("use_pytorch_profiler") or OVERALL not in (args.get("profile_target") or ()):
        return Fragment()
    start, end = _count(args, "profile_step_start", 0), _count(args, "profile_step_end", 0)
    if end <= start:
        raise ConfigError("--profile-step-end", end, f"a rollout after --profile-step-start ({start})")
    steps = StepSelection((Window(first + start, first + end - 1),))
    backend = BackendPlan(TORCH, (Target(ACTOR),), steps, controller=False)
    directory = args.get("tensorboard_dir")
    return Fragment((backend,), (("directory", directory),) if directory else ())


def memory_fragment(args: Mapping, first: int) -> Fragment:
    targets = args.get("profile_target") or ()
    if not args.get("record_memory_history") or OVERALL not in targets or args.get("memory_recorder") != "torch":
        return Fragment()
    last = args.get("memory_snapshot_num_steps")
    if last is not None:  # slime dumps when `rollout_id == --memory-snapshot-num-steps - 1`
        last = max(first, _count(args, "memory_snapshot_num_steps", 1) - 1)
    steps = StepSelection((Window(first, MAX_STEP if last is None else last),))
    backend = BackendPlan(MEMORY, (Target(ACTOR),), steps, options=memory_options(DEFAULT_MAX_ENTRIES, True),
                          output_dir=args.get("memory_snapshot_dir") or ".", controller=False)  # fmt: skip
    return Fragment((backend,))


def slime_fragment(args: Mapping, first: int = FIRST_ROLLOUT) -> Fragment:
    """slime's parsed arguments (`vars(args)`); `first`: the run's first rollout (`--start-rollout-id`)."""
    torch, memory = torch_fragment(args, first), memory_fragment(args, first)
    return Fragment(torch.backends + memory.backends, torch.torch)
