"""RLinf-style YAML configuration (`cluster.profiling`, or a bare section with a `backend` key) -> a backend.

RLinf worker groups are Ray actors named `<Group>:<rank>`: a group name without wildcards
becomes the patterns `<Group>` and `<Group>:*`. `steps` are RLinf's own step numbers, which count from 0.
The nsys capture range follows nrlprof.config.nsys.options: not RLinf's `stop`, which silently keeps only the
first of several steps.

`cluster.profiling` is read by RLinf's own Cluster too, which knows the backends `nsight` and `rocprof_sys`
only: nrlprof's `torch` backend is refused there, and taken in a bare section of nrlprof's own file
(NRL_PROFILE_CONFIG), which RLinf never reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nrlprof.config.fragment import Fragment
from nrlprof.config.nsys.options import build_nsys_options, normalise_options, nsys_flags
from nrlprof.config.plan import NSYS, ROCPROF, TORCH, BackendPlan, Target
from nrlprof.config.readers import check_keys, key, lookup, mapping, names, optional_str, read_bool, step_list
from nrlprof.config.steps import StepSelection
from nrlprof.config.tool_env import environment_items
from nrlprof.errors import ConfigError

GLOB_CHARS = frozenset("*?[")
RLINF_BACKENDS = {"nsight": NSYS, "rocprof_sys": ROCPROF, "torch": TORCH}
# The backends RLinf's own Cluster accepts in `cluster.profiling`.
RLINF_OWN_BACKENDS = ("nsight", "rocprof_sys")
FIRST_STEP = 0
# In `worker_groups`, every group RLinf launches (RLinf's ProfileConfig.profiles_worker_group).
RLINF_ALL_GROUPS = "all"
WORKER_GROUPS_FORM = "a list of group names such as [ActorGroup, RolloutGroup], one name, or all (fnmatch allowed)"
RLINF_KEYS = frozenset(
    {"backend", "enabled", "worker_groups", "steps", "output_dir", "options", "flags", "args", "env"}
)


def rlinf_section(config: Mapping, prefix: str) -> tuple[str, object] | None:
    found, value = lookup(config, "cluster.profiling")
    if found:
        return key(prefix, "cluster.profiling"), value
    if "backend" in config:
        return prefix, config
    return None


def _default_output_dir(root: Mapping) -> str | None:
    _, log_path = lookup(root, "runner.logger.log_path")
    _, experiment = lookup(root, "runner.logger.experiment_name")
    if isinstance(log_path, str) and log_path and isinstance(experiment, str) and experiment:
        return os.path.join(log_path, experiment, "profiling")
    return None


def _group_targets(groups: tuple[str, ...]) -> tuple[Target, ...]:
    """RLinf names each rank's actor `<Group>:<rank>`; a plain group name also matches those. Matched as RLinf
    matches (`rlinf_groups`): without case, and `all` for every group."""
    patterns: list[str] = []
    for group in groups:
        patterns.append(group)
        if not GLOB_CHARS & set(group) and group.lower() != RLINF_ALL_GROUPS:
            patterns.append(f"{group}:*")
    return tuple(Target(p, rlinf_groups=True) for p in dict.fromkeys(patterns))


def _rlinf_backend(section: Mapping, path: str) -> str:
    known = RLINF_OWN_BACKENDS if path.endswith("cluster.profiling") else tuple(RLINF_BACKENDS)
    backend = section.get("backend")
    if not isinstance(backend, str) or backend not in known:
        detail = "backend is required" if backend is None else "unknown backend"
        if isinstance(backend, str) and backend in RLINF_BACKENDS:
            detail = (
                "RLinf's own Cluster refuses it there; put the section, without `cluster.profiling`, in a file "
                "NRL_PROFILE_CONFIG names, or use the NRL_TORCH_PROFILE_* variables"
            )
        raise ConfigError(key(path, "backend"), backend, "one of " + ", ".join(repr(b) for b in known), detail)
    return RLINF_BACKENDS[backend]


def _rlinf_nsys(
    section: Mapping, path: str, targets: tuple[Target, ...], steps: StepSelection | None, output_dir: str | None
) -> BackendPlan:
    options_path = key(path, "options")
    user = mapping(section.get("options"), options_path)
    flags_path = key(path, "flags")
    flags = nsys_flags(section.get("flags"), flags_path)
    options = build_nsys_options(user, steps, options_path, flags=flags, flags_path=flags_path)
    return BackendPlan(NSYS, targets, steps, options=options, flags=flags, output_dir=output_dir)


def _rlinf_rocprof(
    section: Mapping, path: str, targets: tuple[Target, ...], steps: StepSelection | None, output_dir: str | None
) -> BackendPlan:
    args_path = key(path, "args")
    args = normalise_options(mapping(section.get("args"), args_path), args_path)
    options = tuple((k, v) for k, v in args.items() if v is not None)
    env = environment_items(section.get("env"), key(path, "env"))
    return BackendPlan(ROCPROF, targets, steps, options=options, env=env, output_dir=output_dir)


def rlinf_fragment(section: object, path: str, root: Mapping) -> Fragment:
    block = mapping(section, path)
    if not block:
        return Fragment()
    check_keys(block, RLINF_KEYS, path)
    kind = _rlinf_backend(block, path)
    enabled = read_bool(block, "enabled", True, path)
    given_groups = block.get("worker_groups")
    if isinstance(given_groups, str):  # RLinf takes one name as a list of it
        given_groups = [given_groups]
    groups = names(given_groups, key(path, "worker_groups"), WORKER_GROUPS_FORM) or ()
    steps = step_list(block.get("steps"), key(path, "steps"), first=FIRST_STEP)
    output_dir = optional_str(block, "output_dir", path) or _default_output_dir(root)
    if kind == TORCH and steps is None:
        raise ConfigError(
            key(path, "steps"), None, "a list of RLinf step numbers >= 0 such as [3]", "the torch backend needs steps"
        )
    targets = _group_targets(groups)
    if kind == NSYS:
        backend = _rlinf_nsys(block, path, targets, steps, output_dir)
    elif kind == ROCPROF:
        backend = _rlinf_rocprof(block, path, targets, steps, output_dir)
    else:
        backend = BackendPlan(TORCH, targets, steps, output_dir=output_dir)
    if not enabled or not targets:
        return Fragment()
    torch = (("directory", output_dir),) if kind == TORCH and output_dir else ()
    return Fragment((backend,), torch)
