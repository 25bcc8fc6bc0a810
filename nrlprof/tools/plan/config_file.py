"""What `plan` can say of the file NRL_PROFILE_CONFIG names: the profiling keys it holds, and what it could not read.

A verl config composed by Hydra keeps its role blocks (`actor_rollout_ref.actor.profiler`, ...) in the files its
`defaults` list names; nrlprof reads the one file it is given, so those roles are not in the plan. `plan` says so,
with the keys it did find and the two ways to give it the whole config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nrlprof.config.plan import Plan

# Keys of the verl and RLinf profiling sections, shown where the file has them.
PROFILING_KEYS = (
    "trainer.profile_steps",
    "trainer.controller_nsight_options",
    "trainer.worker_nsight_options",
    "global_profiler.steps",
    "global_profiler.tool",
    "global_profiler.profile_continuous_steps",
    "controller_nsight_options",
    "worker_nsight_options",
    "actor_rollout_ref.actor.profiler",
    "actor_rollout_ref.rollout.profiler",
    "actor_rollout_ref.ref.profiler",
    "actor_rollout_ref.actor.profile_ranks",
    "critic.profiler",
    "critic.profile_ranks",
    "reward_model.profiler",
    "cluster.profiling",
)
COMPOSED = (
    "give nrlprof the composed config: `python -m verl.trainer.main_ppo ... --cfg job > composed.yaml` and "
    "NRL_PROFILE_CONFIG=composed.yaml, or NRL_PROFILE_FRAMEWORK_CONFIG=1 to read verl's own config when its "
    "trainer starts"
)
SHOWN_CHARS = 80


def config_file_findings(spec: str, plan: Plan) -> dict[str, Any]:
    """`{"path", "found": [...], "unread": [...], "backends": [...], "advice": str | None}` of an NRL_PROFILE_CONFIG."""
    from nrlprof.config.files import load_config_file
    from nrlprof.config.readers import lookup

    path, dotted, root = load_config_file(spec)
    section = root
    if dotted:
        _, section = lookup(root, dotted)
    section = section if isinstance(section, Mapping) else {}
    found = []
    for key in PROFILING_KEYS:
        present, value = lookup(section, key)
        if present:
            found.append(f"{key}: {_shown(value)}")
    defaults = root.get("defaults")
    unread = []
    if isinstance(defaults, list) and defaults:
        entries = ", ".join(_default_entry(entry) for entry in defaults)
        unread.append(f"the Hydra `defaults` it composes ({entries}): nrlprof reads this file alone, so roles "
                      "profiled there are not in the plan")  # fmt: skip
    backends = [source.rpartition(":")[2] for source in plan.sources if source.startswith("file:")]
    advice = COMPOSED if unread and not backends else None
    return {"path": path, "section": dotted, "found": found, "unread": unread, "backends": backends, "advice": advice}


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    if isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    elif isinstance(value, list):
        text = "[" + ", ".join(_shown(v) for v in value) + "]"
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _default_entry(entry: object) -> str:
    """A `defaults` entry as Hydra's YAML writes it: `group@package: option`, or a name."""
    if isinstance(entry, Mapping) and len(entry) == 1:
        ((key, value),) = entry.items()
        return f"{key}: {_shown(value)}"
    return _shown(entry)
