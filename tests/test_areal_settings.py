"""AReaL's own profiling settings as AReaL's docs mean them, its workers' names and colocated roles, and the modes
whose workers nrlprof does not see (no cluster, no AReaL install)."""

from __future__ import annotations

import logging
from types import SimpleNamespace as Config

import pytest

from nrlprof.adapters.areal import colocated_roles, tell_if_ray_launcher
from nrlprof.config.frameworks.areal import areal_fragment
from nrlprof.config.plan import MEMORY, TORCH
from nrlprof.errors import ConfigError
from nrlprof.workers.identity import WorkerIdentity

ROLES = ("actor", "critic", "rollout")


def windows(fragment, kind) -> list[tuple[int, int]]:
    (backend,) = [b for b in fragment.backends if b.kind == kind]
    return [(w.first, w.last) for w in backend.steps.windows]


def test_perf_tracer_profile_steps_count_from_0_in_every_traced_role_and_the_trainer():
    fragment = areal_fragment({"enabled": True, "profile_steps": [0, 1, 5]}, None, ROLES, "/r/logs/u/e/t", None)
    assert windows(fragment, TORCH) == [(0, 1), (5, 5)]
    (backend,) = fragment.backends
    assert [t.pattern for t in backend.targets] == list(ROLES) and backend.controller
    assert dict(fragment.torch) == {"directory": "/r/logs/u/e/t/perf_tracer"}, "beside AReaL's perf traces"


def test_no_steps_or_a_tracer_that_is_off_profile_nothing():
    assert areal_fragment({"enabled": False, "profile_steps": [1]}, None, ROLES, None, None).backends == ()
    assert areal_fragment({"enabled": True, "profile_steps": None}, None, ROLES, None, None).backends == ()


def test_memory_profiler_is_the_actors_workers_at_its_steps_with_arealss_defaults():
    fragment = areal_fragment(None, {}, ROLES, None, "/r/logs/u/e/t")
    (backend,) = fragment.backends
    assert backend.kind == MEMORY and windows(fragment, MEMORY) == [(0, 1)], "AReaL's default [0, 1]"
    assert [t.pattern for t in backend.targets] == ["actor"] and not backend.controller
    assert backend.output_dir == "/r/logs/u/e/t/memory_snapshots"
    assert dict(backend.options)["max_entries"] == "100000"


@pytest.mark.parametrize(
    ("perf", "memory", "named"),
    [
        ({"enabled": True, "profile_steps": [-1]}, None, "perf_tracer.profile_steps"),
        ({"enabled": "yes", "profile_steps": [1]}, None, "perf_tracer.enabled"),
        (None, {"profile_steps": [0], "max_entries": "many"}, "memory_profiler.max_entries"),
        (None, {"profile_steps": ["zero"]}, "memory_profiler.profile_steps"),
    ],
)
def test_a_bad_setting_is_one_config_error_naming_it(perf, memory, named):
    with pytest.raises(ConfigError) as error:
        areal_fragment(perf, memory, ROLES, None, None)
    assert str(error.value).startswith(named)


def strategy(target=None, fork=False, kind="separation"):
    return Config(scheduling_strategy=Config(type=kind, target=target, fork=fork))


def test_a_role_colocated_without_fork_is_hosted_by_its_targets_actors():
    exp = Config(actor=Config(kl_ctl=0.1, **vars(strategy())), critic=None, rollout=strategy(),
                 ref=strategy("actor", kind="colocation"))  # fmt: skip
    assert colocated_roles(exp) == {"actor": ("ref",), "rollout": ("eval-rollout",)}
    forked = Config(**{**vars(exp), "ref": strategy("actor", fork=True, kind="colocation")})
    assert colocated_roles(forked) == {"rollout": ("eval-rollout",)}, "a forked role has actors of its own"
    no_kl = Config(**{**vars(exp), "actor": Config(kl_ctl=0.0, **vars(strategy()))})
    assert "actor" not in colocated_roles(no_kl), "AReaL makes no ref without a KL penalty"


def test_areal_workers_are_their_roles_and_their_actor_names_not_their_class():
    worker = WorkerIdentity("RayRPCServer", "actor/1", 1, roles=("ref",), framework="areal")
    assert worker.name == "actor-ref"
    assert worker.match_names == ("actor", "ref", "actor-ref", "actor/1")
    assert WorkerIdentity("RayRPCServer", "eval-rollout/0", 0, framework="areal").name == "eval-rollout"


def test_the_older_ray_launcher_is_said_to_run_tasks_nrlprof_does_not_see(caplog):
    with caplog.at_level(logging.WARNING, logger="nrlprof"):
        assert tell_if_ray_launcher(["python", "-m", "areal.infra.launcher.ray", "train.py", "--config", "c.yaml"])
        assert not tell_if_ray_launcher(["python", "train.py", "scheduler.type=ray"])
    (record,) = caplog.records
    assert "launcher areal.infra.launcher.ray starts its workers as Ray tasks, which nrlprof does not see" in (
        record.getMessage()
    )


def test_plan_says_in_one_line_which_areal_modes_make_no_ray_actors_where_areal_is_installed(monkeypatch):
    import importlib.util

    from nrlprof.config.plan import Plan
    from nrlprof.tools.plan.overview import AREAL_UNSEEN, environment_warnings

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "areal" else real(name, *a))
    assert environment_warnings(Plan(), {}) == [AREAL_UNSEEN]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "areal" else real(name, *a))
    assert environment_warnings(Plan(), {}) == []
