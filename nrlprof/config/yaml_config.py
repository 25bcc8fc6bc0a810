"""verl- and RLinf-style YAML configuration -> the same immutable Plan the NRL_* variables give.

Two front ends, detected by their keys (both may appear in one config):

- verl: `trainer.profile_steps` (or `global_profiler.steps`), per-role blocks under
  `actor_rollout_ref.{actor,rollout,ref}`, `critic` and `reward_model` (also `rm`,
  `actor_rollout_ref.critic`, `actor_rollout_ref.rm`), either new style
  (`profiler: {enable, all_ranks, ranks, discrete, tool, ...}`) or old style
  (`profile_ranks`, `profile_ranks_all`, `profile_discrete` on the role), plus
  `worker_nsight_options` / `controller_nsight_options` (top level, under `trainer`, or
  under `global_profiler.global_tool_config.nsys`).
- RLinf: `cluster.profiling` (or a bare profiling section with a `backend` key).

Where the seeds disagree, or document a defect, this module decides:

- Ranks: `null` selects all ranks and `[]` selects none (the role is not profiled), for
  `profile_ranks` and `profiler.ranks` alike. verl's guide says both "null and [] mean no
  ranks" and, in its own example, "profile_ranks: null # Profile all ranks"; the example wins.
  An old-style role without `profile_ranks` (and without `profile_ranks_all: true`) is not
  profiled, which is what the guide's "ref: profile_discrete: False # Disable profiling" means.
- `discrete` / `profile_discrete` only chooses one capture per role instead of one per step;
  it never switches profiling on or off (verl's note 3 claims it does).
- verl's hybrid `actor_rollout_ref` worker runs actor, rollout and ref in one process, so
  their `discrete` must agree; that is checked (among the roles actually profiled, while
  `actor_rollout_ref.hybrid_engine` is true or unset) instead of "guaranteed by the user".
- `capture-range=cudaProfilerApi` is fixed whenever steps are set. A `null` (or absent)
  `capture-range-end` becomes `stop` for one window and `repeat:K` for K windows, so every
  window's report is finalised when it closes: not verl's `repeat-shutdown:6*len(steps)`
  (written only at exit) nor RLinf's `stop` (silently only the first of several steps).
  With a discrete verl role it becomes `repeat` (unbounded): each capture is its own report.
  An explicit `capture-range-end` is kept unless it would drop windows (`stop` with several
  windows, `repeat:N` with N below the window count): that is an error.
- verl's `global_profiler.profile_continuous_steps: false` makes each listed step its own
  window; otherwise consecutive steps form one window, as for the NRL_* variables.
- RLinf worker groups are Ray actors named `<Group>:<rank>`: a group name without wildcards
  becomes the patterns `<Group>` and `<Group>:*`.
- verl roles map to worker names by whole words of the snake-case name (see ROLE_WORDS),
  so `ref` matches `actor_rollout_ref_worker` but not `preference_worker`. A role's
  `patterns` (or `worker_patterns`) key replaces them; `discrete_methods` lists methods
  that each become their own capture in discrete mode. Both are nrlprof extensions.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from nrlprof.config.nsys_options import (
    OPTION_ALIASES,
    merge_options,
    normalise_options,
    nsys_default_options,
    option_text,
)
from nrlprof.config.plan import NSYS, ROCPROF, TORCH, BackendPlan, Plan, Target
from nrlprof.config.steps import StepSelection, Window, steps_from_list
from nrlprof.errors import ConfigError

CONFIG_FILE_VARIABLE = "NRL_PROFILE_CONFIG"
FILE_FORM = (
    "'path/to/config.yaml' or 'path/to/config.yaml:dotted.key' naming a readable YAML file whose section is a mapping"
)
CONFIG_FORM = (
    "a verl config (trainer.profile_steps, global_profiler, actor_rollout_ref, critic, reward_model, "
    "worker_nsight_options) or an RLinf config (cluster.profiling with a backend)"
)
BOOL_FORM = "true or false"
RANKS_FORM = "a list of ranks >= 0 such as [0, 1] ([] selects no rank, null all ranks)"
NAMES_FORM = "a list of names such as [ActorGroup, RolloutGroup] (fnmatch patterns allowed)"
STEPS_FORM = "a list of step numbers >= 1 such as [1, 2, 5], or null"
CAPTURE_END_FORM = "null (nrlprof computes it), 'none', 'stop', 'stop-shutdown', 'repeat:N' or 'repeat-shutdown:N'"
_CAPTURE_END = re.compile(r"^(none|stop|stop-shutdown|(repeat|repeat-shutdown):([1-9][0-9]*))$")
_GLOB_CHARS = frozenset("*?[")

VERL_TOP_KEYS = (
    "global_profiler",
    "actor_rollout_ref",
    "critic",
    "reward_model",
    "rm",
    "controller_nsight_options",
    "worker_nsight_options",
)
VERL_ROLE_PATHS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("actor", ("actor_rollout_ref.actor",)),
    ("rollout", ("actor_rollout_ref.rollout",)),
    ("ref", ("actor_rollout_ref.ref",)),
    ("critic", ("critic", "actor_rollout_ref.critic")),
    ("reward_model", ("reward_model", "rm", "actor_rollout_ref.rm")),
)
HYBRID_ROLES = ("actor", "rollout", "ref")
ROLE_WORDS: dict[str, tuple[str, ...]] = {
    "actor": ("actor",),
    "rollout": ("rollout",),
    "ref": ("ref", "reference"),
    "critic": ("critic",),
    "reward_model": ("reward", "rm"),
}


def _word_patterns(word: str) -> tuple[str, ...]:
    """`word` as a whole word of a snake-case name: alone, first, last or in the middle."""
    return (word, f"{word}_*", f"*_{word}", f"*_{word}_*")


ROLE_PATTERNS: dict[str, tuple[str, ...]] = {
    role: tuple(p for word in words for p in _word_patterns(word)) for role, words in ROLE_WORDS.items()
}

VERL_TOOLS = ("nsys", "torch", "npu", "torch_memory")
SUPPORTED_VERL_TOOLS = {"nsys": NSYS, "torch": TORCH}
OLD_ROLE_KEYS = ("profile_ranks", "profile_ranks_all", "profile_discrete")
PATTERN_KEYS = ("patterns", "worker_patterns")
PROFILER_KEYS = frozenset(
    {"_target_", "enable", "all_ranks", "ranks", "discrete", "tool", "save_path", "tool_config", "discrete_methods"}
    | set(PATTERN_KEYS)
)
TOOL_CONFIG_KEYS: dict[str, frozenset[str] | None] = {
    "nsys": frozenset({"_target_", "discrete"}),
    "torch": frozenset({"_target_", "step_start", "step_end", "contents", "discrete"}),
    "npu": None,
    "torch_memory": None,
}
GLOBAL_PROFILER_KEYS = frozenset(
    {"_target_", "tool", "steps", "profile_continuous_steps", "save_path", "global_tool_config"}
)
GLOBAL_NSYS_KEYS = frozenset({"_target_", "discrete", "controller_nsight_options", "worker_nsight_options"})
TORCH_CONTENTS = {
    "cuda": None,
    "cpu": None,
    "shapes": "record_shapes",
    "memory": "profile_memory",
    "stack": "with_stack",
}

RLINF_BACKENDS = {"nsight": NSYS, "rocprof_sys": ROCPROF, "torch": TORCH}
RLINF_KEYS = frozenset(
    {"backend", "enabled", "worker_groups", "steps", "output_dir", "options", "flags", "args", "env"}
)


@dataclass(frozen=True)
class _Fragment:
    """What one front end contributes: backends, and TorchSettings fields it sets."""

    backends: tuple[BackendPlan, ...] = ()
    torch: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class _Role:
    """A profiled verl role: its targets, and where its discrete setting came from (for errors)."""

    name: str
    path: str
    kind: str
    targets: tuple[Target, ...]
    discrete: bool
    discrete_path: str
    torch_contents: tuple[str, ...] = ()
    save_path: str | None = None


# ---- small typed readers: every error names the full key path ----


def _key(prefix: str, name: str) -> str:
    if not prefix:
        return name
    return prefix + name if prefix.endswith(":") else f"{prefix}.{name}"


def _mapping(value: object, path: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(path, value, "a mapping")
    return dict(value)


def _check_keys(block: Mapping, allowed: Iterable[str], path: str) -> None:
    allowed = sorted(allowed)
    for key in block:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"
        raise ConfigError(_key(path, str(key)), block[key], "one of " + ", ".join(allowed), hint)


def _bool(block: Mapping, name: str, default: bool, path: str) -> bool:
    value = block.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(_key(path, name), value, BOOL_FORM)
    return value


def _optional_bool(block: Mapping, name: str, path: str) -> bool | None:
    return _bool(block, name, False, path) if block.get(name) is not None else None


def _optional_str(block: Mapping, name: str, path: str) -> str | None:
    value = block.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(_key(path, name), value, "a non-empty string, or null")
    return value.strip()


def _ranks(value: object, path: str) -> frozenset[int] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise ConfigError(path, value, RANKS_FORM)
    for rank in value:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ConfigError(path, value, RANKS_FORM, f"{rank!r} is not a rank")
    return frozenset(value)


def _names(value: object, path: str, form: str = NAMES_FORM) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise ConfigError(path, value, form)
    for name in value:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(path, value, form, f"{name!r} is not a name")
    return tuple(name.strip() for name in value)


def _steps(value: object, path: str) -> StepSelection | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple, str)):
        raise ConfigError(path, value, STEPS_FORM)
    return steps_from_list(value, path)


def _lookup(config: Mapping, dotted: str) -> tuple[bool, object]:
    node: object = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


# ---- nsys options shared by both front ends ----


def _flags(value: object, path: str) -> tuple[str, ...]:
    names = _names(value, path, "a list of bare nsys flags such as [python-backtrace]") or ()
    return tuple(name.lstrip("-") for name in names)


def _check_flag_conflicts(flags: tuple[str, ...], options: Mapping[str, object], path: str) -> None:
    for flag in flags:
        canonical = OPTION_ALIASES.get(flag, flag)
        if canonical in options:
            raise ConfigError(
                _key(path, "flags"),
                list(flags),
                f"each nsys option in only one of 'flags' and 'options' ({flag!r} is in both)",
            )


def _capture_end(value: str, steps: StepSelection, path: str) -> str:
    match = _CAPTURE_END.match(value)
    if match is None:
        raise ConfigError(path, value, CAPTURE_END_FORM)
    windows = len(steps.windows)
    kept = int(match.group(3)) if match.group(3) else (1 if value.startswith("stop") else windows)
    if kept < windows:
        raise ConfigError(
            path,
            value,
            f"null, or 'repeat:N' with N >= {windows}",
            f"the steps form {windows} windows and {value!r} ends capturing after {kept}, "
            "so the later windows would silently be missing",
        )
    return value


def _capture_overrides(options: dict[str, str | None], steps: StepSelection | None, path: str) -> dict[str, str | None]:
    """User options with the capture range checked: it is nrlprof's, gated by the steps."""
    result = dict(options)
    if steps is None:
        for name in ("capture-range", "capture-range-end"):
            if result.get(name) is not None:
                raise ConfigError(
                    _key(path, name),
                    result[name],
                    "no capture-range option while steps is null",
                    "with steps null the whole lifetime is profiled and nothing calls cudaProfilerStart; "
                    "set steps to capture chosen steps",
                )
        return result
    if "capture-range" in result:
        value = result.pop("capture-range")
        if value is None or value.lower() != "cudaprofilerapi":
            raise ConfigError(
                _key(path, "capture-range"),
                value,
                "'cudaProfilerApi' (or leave it out)",
                "steps are gated with cudaProfilerStart/Stop, so the capture range is fixed",
            )
    end = result.get("capture-range-end")
    if end is None:
        result.pop("capture-range-end", None)
    else:
        _capture_end(end, steps, _key(path, "capture-range-end"))
    return result


def _nsys_options(
    user: Mapping[str, object], steps: StepSelection | None, path: str, *, discrete: bool = False
) -> tuple[tuple[str, str], ...]:
    """User options over the defaults; discrete targets capture an unknown number of ranges per window."""
    overrides = _capture_overrides(normalise_options(user, path), steps, path)
    defaults = nsys_default_options(steps)
    if discrete and steps is not None:
        defaults["capture-range-end"] = "repeat"
    return tuple(merge_options(defaults, overrides).items())


# ---- verl ----


def _is_verl(config: Mapping) -> bool:
    found, _ = _lookup(config, "trainer.profile_steps")
    return found or any(key in config for key in VERL_TOP_KEYS)


def _global_profiler(config: Mapping, prefix: str) -> dict:
    path = _key(prefix, "global_profiler")
    block = _mapping(config.get("global_profiler"), path)
    _check_keys(block, GLOBAL_PROFILER_KEYS, path)
    tools_path = _key(path, "global_tool_config")
    tools = _mapping(block.get("global_tool_config"), tools_path)
    _check_keys(tools, VERL_TOOLS, tools_path)
    nsys_path = _key(tools_path, "nsys")
    _check_keys(_mapping(tools.get("nsys"), nsys_path), GLOBAL_NSYS_KEYS, nsys_path)
    return block


def _verl_steps(config: Mapping, global_profiler: Mapping, prefix: str) -> StepSelection | None:
    trainer = _mapping(config.get("trainer"), _key(prefix, "trainer"))
    trainer_path = _key(prefix, "trainer.profile_steps")
    global_path = _key(prefix, "global_profiler.steps")
    from_trainer = _steps(trainer.get("profile_steps"), trainer_path)
    from_global = _steps(global_profiler.get("steps"), global_path)
    if from_trainer is not None and from_global is not None and from_trainer != from_global:
        raise ConfigError(
            global_path,
            global_profiler.get("steps"),
            f"the same steps as {trainer_path} ({trainer['profile_steps']!r}), or null",
            "both select the profiled steps",
        )
    steps = from_trainer or from_global
    continuous = _bool(global_profiler, "profile_continuous_steps", True, _key(prefix, "global_profiler"))
    if steps is None or continuous:
        return steps
    return StepSelection(tuple(Window(step, step) for step in steps.steps))


def _nsight_options_block(config: Mapping, global_profiler: Mapping, name: str, prefix: str) -> tuple[str, dict] | None:
    """`name` from the top level, `trainer` or `global_profiler.global_tool_config.nsys` (at most one)."""
    places = (name, f"trainer.{name}", f"global_profiler.global_tool_config.nsys.{name}")
    found = []
    for place in places:
        present, value = _lookup(config, place)
        if present and value is not None:
            found.append((_key(prefix, place), _mapping(value, _key(prefix, place))))
    if len(found) > 1 and any(block != found[0][1] for _, block in found[1:]):
        raise ConfigError(found[1][0], found[1][1], f"the same options as {found[0][0]}, or leave one out")
    return found[0] if found else None


def controller_nsys_options(config: object) -> dict[str, str]:
    """verl's `controller_nsight_options` over nrlprof's defaults: how to launch the driver under nsys.

    Empty when the config sets none. The controller runs under nsys for its whole lifetime,
    so these options carry no capture range from the steps.
    """
    data = _as_dict(config, "config")
    block = _nsight_options_block(
        data, _mapping(data.get("global_profiler"), "global_profiler"), "controller_nsight_options", ""
    )
    if block is None:
        return {}
    path, options = block
    return merge_options(nsys_default_options(None), normalise_options(options, path))


def _role_patterns(block: Mapping, role: str, path: str) -> tuple[str, ...]:
    given = [name for name in PATTERN_KEYS if block.get(name) is not None]
    if len(given) > 1:
        raise ConfigError(_key(path, given[1]), block[given[1]], f"only one of {' and '.join(PATTERN_KEYS)}")
    if not given:
        return ROLE_PATTERNS[role]
    patterns = _names(
        block[given[0]], _key(path, given[0]), "a non-empty list of fnmatch patterns such as ['*policy*']"
    )
    if not patterns:
        raise ConfigError(
            _key(path, given[0]), block[given[0]], "a non-empty list of fnmatch patterns such as ['*policy*']"
        )
    return patterns


def _discrete_methods(block: Mapping, discrete: bool, path: str) -> tuple[str, ...]:
    methods_path = _key(path, "discrete_methods")
    methods = _names(block.get("discrete_methods"), methods_path, "a list of method names such as [update_actor]") or ()
    if methods and not discrete:
        raise ConfigError(methods_path, list(methods), "no discrete_methods unless discrete is true")
    return methods


def _tool_config(profiler: Mapping, path: str) -> dict:
    tools_path = _key(path, "tool_config")
    tools = _mapping(profiler.get("tool_config"), tools_path)
    _check_keys(tools, VERL_TOOLS, tools_path)
    for tool, allowed in TOOL_CONFIG_KEYS.items():
        if allowed is not None:
            _check_keys(_mapping(tools.get(tool), _key(tools_path, tool)), allowed, _key(tools_path, tool))
    return tools


def _tool(profiler: Mapping, global_profiler: Mapping, path: str, prefix: str) -> str:
    for value, where in (
        (profiler.get("tool"), _key(path, "tool")),
        (global_profiler.get("tool"), _key(prefix, "global_profiler.tool")),
    ):
        if value is None:
            continue
        if value not in VERL_TOOLS:
            raise ConfigError(where, value, "one of " + ", ".join(VERL_TOOLS) + ", or null for nsys")
        return value
    return "nsys"


def _discrete(
    profiler: Mapping, tool: str, tools: Mapping, global_profiler: Mapping, path: str, prefix: str
) -> tuple[bool, str]:
    """`profiler.discrete`, else `tool_config.<tool>.discrete`, else the global tool config's; and its key path."""
    global_path = _key(prefix, "global_profiler.global_tool_config")
    global_tools = _mapping(global_profiler.get("global_tool_config"), global_path)
    tool_path = _key(path, f"tool_config.{tool}")
    global_tool_path = _key(global_path, tool)
    candidates = (
        (profiler, path),
        (_mapping(tools.get(tool), tool_path), tool_path),
        (_mapping(global_tools.get(tool), global_tool_path), global_tool_path),
    )
    for block, where in candidates:
        if block.get("discrete") is not None:
            return _bool(block, "discrete", False, where), _key(where, "discrete")
    return False, _key(path, "discrete")


def _torch_details(tools: Mapping, profiler: Mapping, path: str) -> tuple[tuple[str, ...], str | None]:
    """The torch profiler's `contents` and `save_path` of a role that uses the torch tool."""
    torch_path = _key(path, "tool_config.torch")
    torch = _mapping(tools.get("torch"), torch_path)
    if torch.get("step_start") not in (None, 0) or torch.get("step_end") is not None:
        raise ConfigError(
            _key(torch_path, "step_start"),
            [torch.get("step_start"), torch.get("step_end")],
            "step_start 0 and step_end null",
            "mini-batch gating is not supported; the profiled steps come from the step list",
        )
    contents = (
        _names(torch.get("contents"), _key(torch_path, "contents"), "a list drawn from " + ", ".join(TORCH_CONTENTS))
        or ()
    )
    for item in contents:
        if item not in TORCH_CONTENTS:
            raise ConfigError(
                _key(torch_path, "contents"), list(contents), "a list drawn from " + ", ".join(TORCH_CONTENTS)
            )
    return contents, _optional_str(profiler, "save_path", path)


def _new_style_role(role: str, block: Mapping, path: str, global_profiler: Mapping, prefix: str) -> _Role | None:
    ppath = _key(path, "profiler")
    profiler = _mapping(block["profiler"], ppath)
    _check_keys(profiler, PROFILER_KEYS, ppath)
    tools = _tool_config(profiler, ppath)
    enable = _optional_bool(profiler, "enable", ppath)
    all_ranks = _bool(profiler, "all_ranks", False, ppath)
    ranks = _ranks(profiler["ranks"], _key(ppath, "ranks")) if "ranks" in profiler else frozenset()
    tool = _tool(profiler, global_profiler, ppath, prefix)
    discrete, discrete_path = _discrete(profiler, tool, tools, global_profiler, ppath, prefix)
    patterns = _role_patterns(profiler, role, ppath)
    methods = _discrete_methods(profiler, discrete, ppath)
    contents, save_path = _torch_details(tools, profiler, ppath) if tool == "torch" else ((), None)
    selected = None if all_ranks else ranks
    if enable is False:
        return None
    if selected == frozenset():
        if enable:
            raise ConfigError(
                _key(ppath, "enable"),
                True,
                "all_ranks: true or a non-empty ranks list alongside enable: true",
                "no rank is selected",
            )
        return None
    if tool not in SUPPORTED_VERL_TOOLS:
        raise ConfigError(
            _key(ppath, "tool"), tool, "'nsys' or 'torch' for a profiled role", f"nrlprof has no {tool!r} backend"
        )
    targets = tuple(Target(p, selected, discrete=discrete, methods=methods) for p in patterns)
    return _Role(role, path, SUPPORTED_VERL_TOOLS[tool], targets, discrete, discrete_path, contents, save_path)


def _old_style_role(role: str, block: Mapping, path: str) -> _Role | None:
    all_ranks = _bool(block, "profile_ranks_all", False, path)
    ranks = _ranks(block["profile_ranks"], _key(path, "profile_ranks")) if "profile_ranks" in block else frozenset()
    discrete = _bool(block, "profile_discrete", False, path)
    patterns = _role_patterns(block, role, path)
    methods = _discrete_methods(block, discrete, path)
    selected = None if all_ranks else ranks
    if selected == frozenset():
        return None
    targets = tuple(Target(p, selected, discrete=discrete, methods=methods) for p in patterns)
    return _Role(role, path, NSYS, targets, discrete, _key(path, "profile_discrete"))


def _verl_role(role: str, dotted: str, config: Mapping, global_profiler: Mapping, prefix: str) -> _Role | None:
    path = _key(prefix, dotted)
    _, value = _lookup(config, dotted)
    block = _mapping(value, path)
    old_keys = [key for key in OLD_ROLE_KEYS if key in block]
    if block.get("profiler") is not None and old_keys:
        raise ConfigError(
            _key(path, old_keys[0]),
            block[old_keys[0]],
            f"either {_key(path, 'profiler')} or the old keys {', '.join(OLD_ROLE_KEYS)}, not both",
        )
    if block.get("profiler") is not None:
        return _new_style_role(role, block, path, global_profiler, prefix)
    if old_keys:
        return _old_style_role(role, block, path)
    return None


def _verl_roles(config: Mapping, global_profiler: Mapping, prefix: str) -> list[_Role]:
    roles = []
    for role, places in VERL_ROLE_PATHS:
        found = [(place, r) for place in places if (r := _verl_role(role, place, config, global_profiler, prefix))]
        if len(found) > 1:
            raise ConfigError(
                found[1][1].path,
                _lookup(config, found[1][0])[1],
                f"the {role} role profiled from one place only",
                f"{found[0][1].path} profiles it too",
            )
        roles.extend(r for _, r in found)
    return roles


def _check_hybrid(config: Mapping, roles: list[_Role], prefix: str) -> None:
    flag_path = _key(prefix, "actor_rollout_ref")
    if not _bool(_mapping(config.get("actor_rollout_ref"), flag_path), "hybrid_engine", True, flag_path):
        return
    combined = [r for r in roles if r.name in HYBRID_ROLES and r.path.startswith(_key(prefix, "actor_rollout_ref."))]
    if len({r.discrete for r in combined}) <= 1:
        return
    settings = ", ".join(f"{r.discrete_path}={r.discrete}" for r in combined)
    raise ConfigError(
        combined[-1].discrete_path,
        combined[-1].discrete,
        "the same discrete setting for every profiled role of the combined actor_rollout_ref worker",
        f"{settings}: actor, rollout and ref run in one ActorRolloutRefWorker process while "
        f"{_key(prefix, 'actor_rollout_ref.hybrid_engine')} is true",
    )


def _verl_torch_settings(roles: list[_Role], global_profiler: Mapping, prefix: str) -> tuple[tuple[str, object], ...]:
    flags = {TORCH_CONTENTS[c] for r in roles for c in r.torch_contents if TORCH_CONTENTS[c]}
    paths = {r.save_path for r in roles if r.save_path}
    directory = _optional_str(global_profiler, "save_path", _key(prefix, "global_profiler"))
    if directory is None and len(paths) > 1:
        raise ConfigError(
            _key(next(r.path for r in roles if r.save_path), "profiler.save_path"),
            sorted(paths),
            "one save_path for all torch-profiled roles (or global_profiler.save_path)",
        )
    directory = directory or next(iter(paths), None)
    settings: dict[str, object] = dict.fromkeys(sorted(flags), True)
    if directory:
        settings["directory"] = directory
    return tuple(settings.items())


def _verl_fragment(config: Mapping, prefix: str) -> _Fragment:
    global_profiler = _global_profiler(config, prefix)
    steps = _verl_steps(config, global_profiler, prefix)
    roles = _verl_roles(config, global_profiler, prefix)
    _check_hybrid(config, roles, prefix)
    worker_block = _nsight_options_block(config, global_profiler, "worker_nsight_options", prefix)
    options_path, worker_options = worker_block or (_key(prefix, "worker_nsight_options"), {})
    controller_block = _nsight_options_block(config, global_profiler, "controller_nsight_options", prefix)
    if controller_block is not None:
        normalise_options(controller_block[1], controller_block[0])
    if steps is None:
        normalise_options(worker_options, options_path)
        return _Fragment()
    nsys_roles = [r for r in roles if r.kind == NSYS]
    options = _nsys_options(worker_options, steps, options_path, discrete=any(r.discrete for r in nsys_roles))
    backends = []
    if nsys_roles:
        backends.append(BackendPlan(NSYS, tuple(t for r in nsys_roles for t in r.targets), steps, options=options))
    torch_roles = [r for r in roles if r.kind == TORCH]
    if not torch_roles:
        return _Fragment(tuple(backends))
    backends.append(BackendPlan(TORCH, tuple(t for r in torch_roles for t in r.targets), steps))
    return _Fragment(tuple(backends), _verl_torch_settings(torch_roles, global_profiler, prefix))


# ---- RLinf ----


def _rlinf_section(config: Mapping, prefix: str) -> tuple[str, object] | None:
    found, value = _lookup(config, "cluster.profiling")
    if found:
        return _key(prefix, "cluster.profiling"), value
    if "backend" in config:
        return prefix, config
    return None


def _default_output_dir(root: Mapping) -> str | None:
    _, log_path = _lookup(root, "runner.logger.log_path")
    _, experiment = _lookup(root, "runner.logger.experiment_name")
    if isinstance(log_path, str) and log_path and isinstance(experiment, str) and experiment:
        return os.path.join(log_path, experiment, "profiling")
    return None


def _group_targets(groups: tuple[str, ...]) -> tuple[Target, ...]:
    """RLinf names each rank's actor `<Group>:<rank>`; a plain group name also matches those."""
    patterns: list[str] = []
    for group in groups:
        patterns.append(group)
        if not _GLOB_CHARS & set(group):
            patterns.append(f"{group}:*")
    return tuple(Target(p) for p in dict.fromkeys(patterns))


def _rlinf_backend(section: Mapping, path: str) -> str:
    backend = section.get("backend")
    if backend not in RLINF_BACKENDS:
        detail = "backend is required" if backend is None else "unknown backend"
        raise ConfigError(
            _key(path, "backend"), backend, "one of " + ", ".join(repr(b) for b in RLINF_BACKENDS), detail
        )
    return RLINF_BACKENDS[backend]


def _env_items(value: object, path: str) -> tuple[tuple[str, str], ...]:
    env = _mapping(value, path)
    for name, item in env.items():
        if item is None or not isinstance(item, (str, int, float, bool)):
            raise ConfigError(_key(path, str(name)), item, "a string or number")
    return tuple((str(name), option_text(item)) for name, item in env.items())


def _rlinf_nsys(
    section: Mapping, path: str, targets: tuple[Target, ...], steps: StepSelection | None, output_dir: str | None
) -> BackendPlan:
    options_path = _key(path, "options")
    user = _mapping(section.get("options"), options_path)
    flags = _flags(section.get("flags"), _key(path, "flags"))
    _check_flag_conflicts(flags, normalise_options(user, options_path), path)
    options = _nsys_options(user, steps, options_path)
    return BackendPlan(NSYS, targets, steps, options=options, flags=flags, output_dir=output_dir)


def _rlinf_rocprof(
    section: Mapping, path: str, targets: tuple[Target, ...], steps: StepSelection | None, output_dir: str | None
) -> BackendPlan:
    args_path = _key(path, "args")
    args = normalise_options(_mapping(section.get("args"), args_path), args_path)
    options = tuple((k, v) for k, v in args.items() if v is not None)
    env = _env_items(section.get("env"), _key(path, "env"))
    return BackendPlan(ROCPROF, targets, steps, options=options, env=env, output_dir=output_dir)


def _rlinf_fragment(section: object, path: str, root: Mapping) -> _Fragment:
    block = _mapping(section, path)
    if not block:
        return _Fragment()
    _check_keys(block, RLINF_KEYS, path)
    kind = _rlinf_backend(block, path)
    enabled = _bool(block, "enabled", True, path)
    groups = _names(block.get("worker_groups"), _key(path, "worker_groups")) or ()
    steps = _steps(block.get("steps"), _key(path, "steps"))
    output_dir = _optional_str(block, "output_dir", path) or _default_output_dir(root)
    if kind == TORCH and steps is None:
        raise ConfigError(
            _key(path, "steps"), None, "a list of step numbers >= 1 such as [3]", "the torch backend needs steps"
        )
    targets = _group_targets(groups)
    if kind == NSYS:
        backend = _rlinf_nsys(block, path, targets, steps, output_dir)
    elif kind == ROCPROF:
        backend = _rlinf_rocprof(block, path, targets, steps, output_dir)
    else:
        backend = BackendPlan(TORCH, targets, steps, output_dir=output_dir)
    if not enabled or not targets:
        return _Fragment()
    torch = (("directory", output_dir),) if kind == TORCH and output_dir else ()
    return _Fragment((backend,), torch)


# ---- entry points ----


def _as_dict(config: object, source: str) -> dict:
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        try:
            config = OmegaConf.to_container(config, resolve=True)
        except OmegaConfBaseException as err:
            raise ConfigError(
                source, type(config).__name__, "a config whose interpolations resolve", str(err)
            ) from None
    if not isinstance(config, Mapping):
        raise ConfigError(source, config, "a mapping (a dict or an OmegaConf DictConfig)")
    return dict(config)


def _combine(fragments: list[_Fragment], prefix: str) -> _Fragment:
    kinds = [b.kind for f in fragments for b in f.backends]
    for kind in set(kinds):
        if kinds.count(kind) > 1:
            raise ConfigError(
                _key(prefix, "cluster.profiling.backend"),
                kind,
                f"one front end per backend: the verl roles and cluster.profiling both configure {kind}",
            )
    torch = tuple(item for f in fragments for item in f.torch)
    return _Fragment(tuple(b for f in fragments for b in f.backends), torch)


def _plan_from_section(section: Mapping, root: Mapping, prefix: str, base: Plan | None, source: str) -> Plan:
    rlinf = _rlinf_section(section, prefix)
    verl = _is_verl(section)
    if rlinf is None and not verl:
        raise ConfigError(
            prefix.rstrip(":.") or "config", sorted(map(str, section)), CONFIG_FORM, "no profiling section found"
        )
    fragments = []
    if verl:
        fragments.append(_verl_fragment(section, prefix))
    if rlinf is not None:
        fragments.append(_rlinf_fragment(rlinf[1], rlinf[0], root))
    combined = _combine(fragments, prefix)
    plan = base or Plan()
    sources = list(plan.sources)
    for backend in combined.backends:
        plan = plan.with_backend(backend)
        sources.append(f"{source}:{backend.kind}")
    return replace(plan, torch=replace(plan.torch, **dict(combined.torch)), sources=tuple(sources))


def plan_from_mapping(config: object, base: Plan | None = None, *, source: str = "yaml") -> Plan:
    """The plan a verl and/or RLinf config describes; a backend it configures replaces the base's one.

    `config` is a dict or an OmegaConf DictConfig (resolved). Without profiling selected
    (verl steps null, RLinf `enabled: false` or no worker groups) the base comes back unchanged.
    """
    data = _as_dict(config, "config")
    return _plan_from_section(data, data, "", base, source)


def _split_spec(spec: str) -> tuple[Path, str | None]:
    """`path.yaml:dotted.key` when the part before the last ':' is a file, else the whole spec is the path."""
    head, colon, key = spec.rpartition(":")
    if colon and head and Path(head).is_file():
        return Path(head), key.strip() or None
    if colon and head and not Path(spec).exists():
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"no file {head!r}")
    return Path(spec), None


def _load_yaml(path: Path, spec: str) -> object:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"no file {str(path)!r}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"cannot read {str(path)!r} ({err})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"invalid YAML in {str(path)!r}: {err}") from None
    if "${" in text and isinstance(data, dict):
        data = _resolve_interpolations(data, spec)
    return data


def _resolve_interpolations(data: dict, spec: str) -> dict:
    try:
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException
    except ImportError:
        return data
    try:
        return OmegaConf.to_container(OmegaConf.create(data), resolve=True)
    except OmegaConfBaseException as err:
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"an interpolation does not resolve: {err}") from None


def plan_from_file(spec: str, base: Plan | None = None) -> Plan:
    """The plan in `path.yaml` or in the section `path.yaml:dotted.key` (the NRL_PROFILE_CONFIG forms)."""
    path, key = _split_spec(spec)
    root = _load_yaml(path, spec)
    if not isinstance(root, Mapping):
        raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"{str(path)!r} does not hold a mapping")
    section: object = root
    if key is not None:
        found, section = _lookup(root, key)
        if not found:
            raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"no key {key!r} in {str(path)!r}")
        if not isinstance(section, Mapping):
            raise ConfigError(CONFIG_FILE_VARIABLE, spec, FILE_FORM, f"{key!r} in {str(path)!r} is not a mapping")
    prefix = f"{path}:{key}" if key else f"{path}:"
    return _plan_from_section(dict(section), root, prefix, base, f"file:{spec}")


__all__ = [
    "ROLE_PATTERNS",
    "controller_nsys_options",
    "plan_from_file",
    "plan_from_mapping",
]
