"""verl-style YAML configuration -> backends of a Plan.

verl's config names the profiled steps in `trainer.profile_steps` (or `global_profiler.steps`), per-role
blocks under `actor_rollout_ref.{actor,rollout,ref}`, `critic` and `reward_model` (also `rm`,
`actor_rollout_ref.critic`, `actor_rollout_ref.rm`), either new style
(`profiler: {enable, all_ranks, ranks, discrete, tool, ...}`) or old style
(`profile_ranks`, `profile_ranks_all`, `profile_discrete` on the role), plus
`worker_nsight_options` / `controller_nsight_options` (top level, under `trainer`, or
under `global_profiler.global_tool_config.nsys`).

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
- The nsys capture range follows nrlprof.config.nsys.options (not verl's
  `repeat-shutdown:6*len(steps)`, written only at exit).
- `global_profiler.profile_continuous_steps: false` makes each listed step its own
  window; otherwise consecutive steps form one window, as for the NRL_* variables.
- Roles map to worker names by whole words of the snake-case name (see ROLE_WORDS),
  so `ref` matches `actor_rollout_ref_worker` but not `preference_worker`. A role's
  `patterns` (or `worker_patterns`) key replaces them; `discrete_methods` lists methods
  that each become their own capture in discrete mode. Both are nrlprof extensions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nrlprof.config.fragment import Fragment
from nrlprof.config.memory import DEFAULT_MAX_ENTRIES, DEFAULT_MEMORY_DIR, memory_options, parse_max_entries
from nrlprof.config.nsys.options import build_nsys_options, merge_options, normalise_options, nsys_default_options
from nrlprof.config.plan import MEMORY, NSYS, TORCH, BackendPlan, Target
from nrlprof.config.readers import (
    as_mapping,
    check_keys,
    key,
    lookup,
    mapping,
    names,
    optional_bool,
    optional_str,
    rank_list,
    read_bool,
    step_list,
)
from nrlprof.config.steps import StepSelection, Window
from nrlprof.errors import ConfigError

MAX_SINGLE_STEP_WINDOWS = 10_000


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
SUPPORTED_VERL_TOOLS = {"nsys": NSYS, "torch": TORCH, "torch_memory": MEMORY}
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
    # nrlprof records full Python stacks (torch's default); `stack_depth` is accepted for verl's configs as is.
    "torch_memory": frozenset({"_target_", "trace_alloc_max_entries", "stack_depth"}),
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
CONTENTS_FORM = "a list drawn from " + ", ".join(TORCH_CONTENTS)
PATTERNS_FORM = "a non-empty list of fnmatch patterns such as ['*policy*']"


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
    max_entries: int | None = None


def is_verl(config: Mapping) -> bool:
    found, _ = lookup(config, "trainer.profile_steps")
    return found or any(key in config for key in VERL_TOP_KEYS)


def _global_profiler(config: Mapping, prefix: str) -> dict:
    path = key(prefix, "global_profiler")
    block = mapping(config.get("global_profiler"), path)
    check_keys(block, GLOBAL_PROFILER_KEYS, path)
    tools_path = key(path, "global_tool_config")
    tools = mapping(block.get("global_tool_config"), tools_path)
    check_keys(tools, VERL_TOOLS, tools_path)
    nsys_path = key(tools_path, "nsys")
    check_keys(mapping(tools.get("nsys"), nsys_path), GLOBAL_NSYS_KEYS, nsys_path)
    return block


def _verl_steps(config: Mapping, global_profiler: Mapping, prefix: str) -> StepSelection | None:
    trainer = mapping(config.get("trainer"), key(prefix, "trainer"))
    trainer_path = key(prefix, "trainer.profile_steps")
    global_path = key(prefix, "global_profiler.steps")
    from_trainer = step_list(trainer.get("profile_steps"), trainer_path)
    from_global = step_list(global_profiler.get("steps"), global_path)
    if from_trainer is not None and from_global is not None and from_trainer != from_global:
        raise ConfigError(
            global_path,
            global_profiler.get("steps"),
            f"the same steps as {trainer_path} ({trainer['profile_steps']!r}), or null",
            "both select the profiled steps",
        )
    steps = from_trainer or from_global
    continuous = read_bool(global_profiler, "profile_continuous_steps", True, key(prefix, "global_profiler"))
    if steps is None or continuous:
        return steps
    if steps.step_count > MAX_SINGLE_STEP_WINDOWS:
        raise ConfigError(
            key(prefix, "global_profiler.profile_continuous_steps"),
            False,
            f"true, or at most {MAX_SINGLE_STEP_WINDOWS} steps when each step is its own window",
            f"the steps select {steps.step_count} steps",
        )
    return StepSelection(tuple(Window(step, step) for window in steps.windows for step in window.steps))


def _nsight_options_block(config: Mapping, global_profiler: Mapping, name: str, prefix: str) -> tuple[str, dict] | None:
    """`name` from the top level, `trainer` or `global_profiler.global_tool_config.nsys` (at most one)."""
    places = (name, f"trainer.{name}", f"global_profiler.global_tool_config.nsys.{name}")
    found = []
    for place in places:
        present, value = lookup(config, place)
        if present and value is not None:
            found.append((key(prefix, place), mapping(value, key(prefix, place))))
    if len(found) > 1 and any(block != found[0][1] for _, block in found[1:]):
        raise ConfigError(found[1][0], found[1][1], f"the same options as {found[0][0]}, or leave one out")
    return found[0] if found else None


def controller_nsys_options(config: object) -> dict[str, str]:
    """verl's `controller_nsight_options` over nrlprof's defaults: how to launch the driver under nsys.

    Empty when the config sets none. The controller runs under nsys for its whole lifetime,
    so these options carry no capture range from the steps.
    """
    data = as_mapping(config, "config")
    block = _nsight_options_block(
        data, mapping(data.get("global_profiler"), "global_profiler"), "controller_nsight_options", ""
    )
    if block is None:
        return {}
    path, options = block
    return merge_options(nsys_default_options(None), normalise_options(options, path))


def _role_patterns(block: Mapping, role: str, path: str) -> tuple[str, ...]:
    given = [name for name in PATTERN_KEYS if block.get(name) is not None]
    if len(given) > 1:
        raise ConfigError(key(path, given[1]), block[given[1]], f"only one of {' and '.join(PATTERN_KEYS)}")
    if not given:
        return ROLE_PATTERNS[role]
    patterns = names(block[given[0]], key(path, given[0]), PATTERNS_FORM)
    if not patterns:
        raise ConfigError(key(path, given[0]), block[given[0]], PATTERNS_FORM)
    return patterns


def _discrete_methods(block: Mapping, discrete: bool, path: str) -> tuple[str, ...]:
    methods_path = key(path, "discrete_methods")
    methods = names(block.get("discrete_methods"), methods_path, "a list of method names such as [update_actor]") or ()
    if methods and not discrete:
        raise ConfigError(methods_path, list(methods), "no discrete_methods unless discrete is true")
    return methods


def _tool_config(profiler: Mapping, path: str) -> dict:
    tools_path = key(path, "tool_config")
    tools = mapping(profiler.get("tool_config"), tools_path)
    check_keys(tools, VERL_TOOLS, tools_path)
    for tool, allowed in TOOL_CONFIG_KEYS.items():
        if allowed is not None:
            check_keys(mapping(tools.get(tool), key(tools_path, tool)), allowed, key(tools_path, tool))
    return tools


def _tool(profiler: Mapping, global_profiler: Mapping, path: str, prefix: str) -> str:
    for value, where in (
        (profiler.get("tool"), key(path, "tool")),
        (global_profiler.get("tool"), key(prefix, "global_profiler.tool")),
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
    global_path = key(prefix, "global_profiler.global_tool_config")
    global_tools = mapping(global_profiler.get("global_tool_config"), global_path)
    tool_path = key(path, f"tool_config.{tool}")
    global_tool_path = key(global_path, tool)
    candidates = (
        (profiler, path),
        (mapping(tools.get(tool), tool_path), tool_path),
        (mapping(global_tools.get(tool), global_tool_path), global_tool_path),
    )
    for block, where in candidates:
        if block.get("discrete") is not None:
            return read_bool(block, "discrete", False, where), key(where, "discrete")
    return False, key(path, "discrete")


def _torch_details(tools: Mapping, profiler: Mapping, path: str) -> tuple[tuple[str, ...], str | None]:
    """The torch profiler's `contents` and `save_path` of a role that uses the torch tool."""
    torch_path = key(path, "tool_config.torch")
    torch = mapping(tools.get("torch"), torch_path)
    if torch.get("step_start") not in (None, 0) or torch.get("step_end") is not None:
        raise ConfigError(
            key(torch_path, "step_start"),
            [torch.get("step_start"), torch.get("step_end")],
            "step_start 0 and step_end null",
            "mini-batch gating is not supported; the profiled steps come from the step list",
        )
    contents = names(torch.get("contents"), key(torch_path, "contents"), CONTENTS_FORM) or ()
    for item in contents:
        if item not in TORCH_CONTENTS:
            raise ConfigError(key(torch_path, "contents"), list(contents), CONTENTS_FORM)
    return contents, optional_str(profiler, "save_path", path)


def _new_style_role(role: str, block: Mapping, path: str, global_profiler: Mapping, prefix: str) -> _Role | None:
    ppath = key(path, "profiler")
    profiler = mapping(block["profiler"], ppath)
    check_keys(profiler, PROFILER_KEYS, ppath)
    tools = _tool_config(profiler, ppath)
    enable = optional_bool(profiler, "enable", ppath)
    all_ranks = read_bool(profiler, "all_ranks", False, ppath)
    ranks = rank_list(profiler["ranks"], key(ppath, "ranks")) if "ranks" in profiler else frozenset()
    tool = _tool(profiler, global_profiler, ppath, prefix)
    discrete, discrete_path = _discrete(profiler, tool, tools, global_profiler, ppath, prefix)
    patterns = _role_patterns(profiler, role, ppath)
    methods = _discrete_methods(profiler, discrete, ppath)
    contents, save_path = _torch_details(tools, profiler, ppath) if tool == "torch" else ((), None)
    max_entries = _memory_entries(tools, global_profiler, ppath, prefix) if tool == "torch_memory" else None
    selected = None if all_ranks else ranks
    if enable is False:
        return None
    if selected == frozenset():
        if enable:
            raise ConfigError(
                key(ppath, "enable"),
                True,
                "all_ranks: true or a non-empty ranks list alongside enable: true",
                "no rank is selected",
            )
        return None
    if tool not in SUPPORTED_VERL_TOOLS:
        raise ConfigError(
            key(ppath, "tool"),
            tool,
            "'nsys', 'torch' or 'torch_memory' for a profiled role",
            f"nrlprof has no {tool!r} backend",
        )
    targets = tuple(Target(p, selected, discrete=discrete, methods=methods) for p in patterns)
    if tool == "torch_memory":
        save_path = optional_str(profiler, "save_path", ppath)
    kind = SUPPORTED_VERL_TOOLS[tool]
    return _Role(role, path, kind, targets, discrete, discrete_path, contents, save_path, max_entries)


def _memory_entries(tools: Mapping, global_profiler: Mapping, path: str, prefix: str) -> int | None:
    """`tool_config.torch_memory.trace_alloc_max_entries`, else the global tool config's."""
    global_path = key(prefix, "global_profiler.global_tool_config")
    global_tools = mapping(global_profiler.get("global_tool_config"), global_path)
    for block, where in (
        (tools.get("torch_memory"), key(path, "tool_config.torch_memory")),
        (global_tools.get("torch_memory"), key(global_path, "torch_memory")),
    ):
        value = mapping(block, where).get("trace_alloc_max_entries")
        if value is not None:
            return parse_max_entries(str(value), key(where, "trace_alloc_max_entries"))
    return None


def _old_style_role(role: str, block: Mapping, path: str) -> _Role | None:
    all_ranks = read_bool(block, "profile_ranks_all", False, path)
    ranks = rank_list(block["profile_ranks"], key(path, "profile_ranks")) if "profile_ranks" in block else frozenset()
    discrete = read_bool(block, "profile_discrete", False, path)
    patterns = _role_patterns(block, role, path)
    methods = _discrete_methods(block, discrete, path)
    selected = None if all_ranks else ranks
    if selected == frozenset():
        return None
    targets = tuple(Target(p, selected, discrete=discrete, methods=methods) for p in patterns)
    return _Role(role, path, NSYS, targets, discrete, key(path, "profile_discrete"))


def _verl_role(role: str, dotted: str, config: Mapping, global_profiler: Mapping, prefix: str) -> _Role | None:
    path = key(prefix, dotted)
    _, value = lookup(config, dotted)
    block = mapping(value, path)
    old_keys = [key for key in OLD_ROLE_KEYS if key in block]
    if block.get("profiler") is not None and old_keys:
        raise ConfigError(
            key(path, old_keys[0]),
            block[old_keys[0]],
            f"either {key(path, 'profiler')} or the old keys {', '.join(OLD_ROLE_KEYS)}, not both",
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
                lookup(config, found[1][0])[1],
                f"the {role} role profiled from one place only",
                f"{found[0][1].path} profiles it too",
            )
        roles.extend(r for _, r in found)
    return roles


def _check_hybrid(config: Mapping, roles: list[_Role], prefix: str) -> None:
    flag_path = key(prefix, "actor_rollout_ref")
    if not read_bool(mapping(config.get("actor_rollout_ref"), flag_path), "hybrid_engine", True, flag_path):
        return
    combined = [r for r in roles if r.name in HYBRID_ROLES and r.path.startswith(key(prefix, "actor_rollout_ref."))]
    if len({r.discrete for r in combined}) <= 1:
        return
    settings = ", ".join(f"{r.discrete_path}={r.discrete}" for r in combined)
    raise ConfigError(
        combined[-1].discrete_path,
        combined[-1].discrete,
        "the same discrete setting for every profiled role of the combined actor_rollout_ref worker",
        f"{settings}: actor, rollout and ref run in one ActorRolloutRefWorker process while "
        f"{key(prefix, 'actor_rollout_ref.hybrid_engine')} is true",
    )


def _verl_torch_settings(roles: list[_Role], global_profiler: Mapping, prefix: str) -> tuple[tuple[str, object], ...]:
    flags = {TORCH_CONTENTS[c] for r in roles for c in r.torch_contents if TORCH_CONTENTS[c]}
    paths = {r.save_path for r in roles if r.save_path}
    directory = optional_str(global_profiler, "save_path", key(prefix, "global_profiler"))
    if directory is None and len(paths) > 1:
        raise ConfigError(
            key(next(r.path for r in roles if r.save_path), "profiler.save_path"),
            sorted(paths),
            "one save_path for all torch-profiled roles (or global_profiler.save_path)",
        )
    directory = directory or next(iter(paths), None)
    settings: dict[str, object] = dict.fromkeys(sorted(flags), True)
    if directory:
        settings["directory"] = directory
    return tuple(settings.items())


def verl_fragment(config: Mapping, prefix: str) -> Fragment:
    global_profiler = _global_profiler(config, prefix)
    steps = _verl_steps(config, global_profiler, prefix)
    roles = _verl_roles(config, global_profiler, prefix)
    _check_hybrid(config, roles, prefix)
    worker_block = _nsight_options_block(config, global_profiler, "worker_nsight_options", prefix)
    options_path, worker_options = worker_block or (key(prefix, "worker_nsight_options"), {})
    controller_block = _nsight_options_block(config, global_profiler, "controller_nsight_options", prefix)
    if controller_block is not None:
        normalise_options(controller_block[1], controller_block[0])
    if steps is None:
        normalise_options(worker_options, options_path)
        return Fragment()
    nsys_roles = [r for r in roles if r.kind == NSYS]
    options = build_nsys_options(worker_options, steps, options_path, discrete=any(r.discrete for r in nsys_roles))
    backends = []
    if nsys_roles:
        backends.append(BackendPlan(NSYS, tuple(t for r in nsys_roles for t in r.targets), steps, options=options))
    memory_roles = [r for r in roles if r.kind == MEMORY]
    if memory_roles:
        entries = max((r.max_entries for r in memory_roles if r.max_entries), default=DEFAULT_MAX_ENTRIES)
        global_path = optional_str(global_profiler, "save_path", key(prefix, "global_profiler"))
        directory = next((r.save_path for r in memory_roles if r.save_path), None) or global_path or DEFAULT_MEMORY_DIR
        memory_targets = tuple(t for r in memory_roles for t in r.targets)
        backends.append(
            BackendPlan(MEMORY, memory_targets, steps, options=memory_options(entries, False), output_dir=directory)
        )
    torch_roles = [r for r in roles if r.kind == TORCH]
    if not torch_roles:
        return Fragment(tuple(backends))
    backends.append(BackendPlan(TORCH, tuple(t for r in torch_roles for t in r.targets), steps))
    return Fragment(tuple(backends), _verl_torch_settings(torch_roles, global_profiler, prefix))
