"""verl- and RLinf-style configuration mappings -> the same immutable Plan the NRL_* variables give.

Both front ends are detected by their keys and may appear in one config: verl (nrlprof.config.frameworks.verl)
and RLinf (nrlprof.config.frameworks.rlinf). Files named by NRL_PROFILE_CONFIG are read by nrlprof.config.files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from nrlprof.config.fragment import Fragment
from nrlprof.config.frameworks.rlinf import rlinf_fragment, rlinf_section
from nrlprof.config.frameworks.verl import controller_nsys_options, is_verl, verl_fragment
from nrlprof.config.plan import NSYS, Plan
from nrlprof.config.readers import as_mapping, key
from nrlprof.errors import ConfigError

CONFIG_FORM = (
    "a verl config (trainer.profile_steps, global_profiler, actor_rollout_ref, critic, reward_model, "
    "worker_nsight_options) or an RLinf config (cluster.profiling with a backend)"
)


def _combine(fragments: list[Fragment], prefix: str) -> Fragment:
    kinds = [b.kind for f in fragments for b in f.backends]
    for kind in set(kinds):
        if kinds.count(kind) > 1:
            raise ConfigError(
                key(prefix, "cluster.profiling.backend"),
                kind,
                f"one front end per backend: the verl roles and cluster.profiling both configure {kind}",
            )
    torch = tuple(item for f in fragments for item in f.torch)
    return Fragment(tuple(b for f in fragments for b in f.backends), torch)


def plan_from_section(section: Mapping, root: Mapping, prefix: str, base: Plan | None, source: str) -> Plan:
    """The plan of one config section; `root` is the whole document, `prefix` names the section in errors."""
    rlinf = rlinf_section(section, prefix)
    verl = is_verl(section)
    if rlinf is None and not verl:
        raise ConfigError(
            prefix.rstrip(":.") or "config", sorted(map(str, section)), CONFIG_FORM, "no profiling section found"
        )
    fragments = []
    if verl:
        fragments.append(verl_fragment(section, prefix))
    if rlinf is not None:
        fragments.append(rlinf_fragment(rlinf[1], rlinf[0], root))
    combined = _combine(fragments, prefix)
    plan = base or Plan()
    sources = list(plan.sources)
    for backend in combined.backends:
        plan = plan.with_backend(backend)
        sources.append(f"{source}:{backend.kind}")
    controller = plan.controller_nsys
    if verl and any(b.kind == NSYS for b in combined.backends):
        controller = tuple(sorted(controller_nsys_options(section).items())) or controller
    return replace(
        plan, torch=replace(plan.torch, **dict(combined.torch)), sources=tuple(sources), controller_nsys=controller
    )


def plan_from_mapping(config: object, base: Plan | None = None, *, source: str = "yaml") -> Plan:
    """The plan a verl and/or RLinf config describes; a backend it configures replaces the base's one.

    `config` is a dict or an OmegaConf DictConfig (resolved). Without profiling selected
    (verl steps null, RLinf `enabled: false` or no worker groups) the base comes back unchanged.
    """
    data = as_mapping(config, "config")
    return plan_from_section(data, data, "", base, source)


__all__ = ["plan_from_mapping", "plan_from_section"]
