"""verl- and RLinf-style YAML -> Plan: every seed example, the file form, OmegaConf, env precedence, errors."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
import yaml
from helpers.verl_example import VERL_EN_SHARED
from omegaconf import OmegaConf

import nrlprof.config
from nrlprof.config.env import load_plan, plan_from_env
from nrlprof.config.files import plan_from_file
from nrlprof.config.frameworks.verl import ROLE_PATTERNS, controller_nsys_options
from nrlprof.config.plan import NSYS, ROCPROF, TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.config.yaml_config import plan_from_mapping
from nrlprof.errors import ConfigError
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_backend

# ---- seed 000: verl nsight guide (EN) ----

VERL_EN_DISABLED = """
    trainer:
        profile_steps: null # disable profile
"""

# VERL_EN_SHARED is in helpers/verl_example.py: a test on a real cluster runs it too

VERL_EN_DISCRETE = """
    trainer:
        profile_steps: [1, 2, 5]  # Profile steps 1, 2, and 5

    actor_rollout_ref:
        actor:
            profile_discrete: True
            profile_ranks: [0, 1]  # Only profile ranks 0 and 1 for actor
        rollout:
            profile_discrete: True
            profile_ranks: null    # Profile all ranks for rollout
        ref:
            profile_discrete: False  # Disable profiling for ref policy
    critic:
        profile_discrete: True
        profile_ranks: [0]      # Only profile rank 0 for critic
"""

# ---- seed 001: verl nsight guide (ZH) ----

VERL_ZH_DISABLED = """
    trainer:
        profile_steps: null # 禁用性能分析
"""

VERL_ZH_ONE_DATABASE = """
    trainer:
        profile_steps: [1, 2, 5]
    actor_rollout_ref:
        actor:
            profiler:
                discrete: False
                all_ranks: False
                ranks: [0, 1]
        rollout:
            profiler:
                discrete: False
                all_ranks: False
                ranks: [0, 1]
        ref:
            profiler:
                discrete: False
                all_ranks: False
                ranks: [0, 1]
    critic:
        profiler:
            discrete: False
            all_ranks: False
            ranks: [0, 1]
"""

VERL_ZH_DISCRETE = """
    trainer:
        profile_steps: [1, 2, 5]
    actor_rollout_ref:
        actor:
            profiler:
                discrete: True
                all_ranks: False
                ranks: [0, 1]
        rollout:
            profiler:
                discrete: True
                all_ranks: False
                ranks: [0, 1]
        ref:
            profiler:
                discrete: True
                all_ranks: False
                ranks: [0, 1]
    critic:
        profiler:
            discrete: True
            all_ranks: False
            ranks: [0, 1]
"""

# ---- seed 003: RLinf GPU profiling ----

RLINF_DEFAULTS = """
defaults:
  - training_backend/fsdp@actor.fsdp_config
  - weight_syncer/patch_syncer@weight_syncer
  - profile/default@cluster.profiling
"""

RLINF_DISABLED = """
cluster:
  profiling:
    backend: nsight
    enabled: false
"""

RLINF_OUTPUT_DIR = """
cluster:
  profiling:
    backend: nsight
    output_dir: /mnt/public/profiles/my_run
"""

RLINF_WORKER_GROUPS = """
cluster:
  profiling:
    backend: nsight
    worker_groups: [ActorGroup, RolloutGroup]
"""

RLINF_ONE_STEP = """
cluster:
  profiling:
    backend: nsight
    enabled: true
    steps: [3]            # only profile global step 3
"""

RLINF_MANY_STEPS = """
cluster:
  profiling:
    steps: [3, 10, 50]
"""

RLINF_PRESET = """
backend: nsight
enabled: true
worker_groups: [ActorGroup, RolloutGroup, EnvGroup, Actor, Rollout, Env]
options:
  t: cuda,cudnn,cublas,nvtx,osrt
  sample: process-tree
  cpuctxsw: process-tree
  cudabacktrace: all
  osrt-threshold: 1000
flags: []
"""

RLINF_OPTIONS = """
cluster:
  profiling:
    backend: nsight
    options:
      t: cuda,cudnn,cublas,nvtx,osrt
      sample: process-tree
      backtrace: fp
      capture-range: cudaProfilerApi
      capture-range-end: stop
    flags: [python-backtrace]
"""

RLINF_ROCPROF_MINIMAL = """
backend: rocprof_sys
enabled: true
worker_groups: [ActorGroup, RolloutGroup, EnvGroup]
args:
  T: hip           # trace HIP API calls
"""

RLINF_ROCPROF_ARGS = """
cluster:
  profiling:
    backend: rocprof_sys
    args:
      T: hip,hsa,rccl     # single-char key → -T hip,hsa,rccl
      output-format: json  # multi-char key  → --output-format=json
"""

RLINF_ROCPROF_ENV = """
cluster:
  profiling:
    backend: rocprof_sys
    env:
      ROCPROFSYS_SAMPLING_FREQ: "100"
"""

PRESET_GROUP_PATTERNS = (
    "ActorGroup",
    "ActorGroup:*",
    "RolloutGroup",
    "RolloutGroup:*",
    "EnvGroup",
    "EnvGroup:*",
    "Actor",
    "Actor:*",
    "Rollout",
    "Rollout:*",
    "Env",
    "Env:*",
)


def load(text: str) -> dict:
    return yaml.safe_load(text)


def windows(backend: BackendPlan) -> list[tuple[int, int]]:
    assert backend.steps is not None
    return [(w.first, w.last) for w in backend.steps.windows]


def role_targets(backend: BackendPlan, role: str) -> list[Target]:
    return [t for t in backend.targets if t.pattern in ROLE_PATTERNS[role]]


def patterns_of(backend: BackendPlan) -> tuple[str, ...]:
    return tuple(t.pattern for t in backend.targets)


def with_preset(*overrides: str, runner: dict | None = None):
    """Hydra-style composition: the `profile/default@cluster.profiling` preset, then each override."""
    layers = [OmegaConf.create({"cluster": {"profiling": load(RLINF_PRESET)}})]
    if runner is not None:
        layers.append(OmegaConf.create({"runner": runner}))
    layers += [OmegaConf.create(load(text)) for text in overrides]
    return OmegaConf.merge(*layers)


# ---- verl examples ----


@pytest.mark.parametrize("text", [VERL_EN_DISABLED, VERL_ZH_DISABLED])
def test_verl_null_profile_steps_profiles_nothing(text):
    base = Plan(log_level="DEBUG")
    assert plan_from_mapping(load(text)) == Plan()
    assert plan_from_mapping(load(text), base=base) == base


def test_verl_en_shared_database_example():
    plan = plan_from_mapping(load(VERL_EN_SHARED))
    assert [b.kind for b in plan.backends] == [NSYS]
    nsys = plan.backend(NSYS)
    assert windows(nsys) == [(1, 2), (5, 5)]
    assert {t.ranks for t in role_targets(nsys, "actor")} == {frozenset({0, 1})}
    assert {t.ranks for t in role_targets(nsys, "rollout")} == {None}
    assert {t.ranks for t in role_targets(nsys, "critic")} == {frozenset({0})}
    assert role_targets(nsys, "ref") == []
    assert not any(t.discrete for t in nsys.targets)
    assert nsys.options_dict == {"t": "cuda,nvtx", "capture-range": "cudaProfilerApi", "capture-range-end": "repeat:2"}
    assert plan.sources == ("yaml:nsys",)


def test_verl_en_discrete_example_ref_is_not_profiled_so_no_conflict():
    nsys = plan_from_mapping(load(VERL_EN_DISCRETE)).backend(NSYS)
    assert role_targets(nsys, "ref") == []
    assert all(t.discrete for t in nsys.targets)
    assert nsys.options_dict["capture-range-end"] == "repeat"
    assert {t.ranks for t in role_targets(nsys, "actor")} == {frozenset({0, 1})}
    assert {t.ranks for t in role_targets(nsys, "critic")} == {frozenset({0})}


@pytest.mark.parametrize(("text", "discrete"), [(VERL_ZH_ONE_DATABASE, False), (VERL_ZH_DISCRETE, True)])
def test_verl_zh_profiler_block_examples(text, discrete):
    plan = plan_from_mapping(load(text))
    nsys = plan.backend(NSYS)
    assert [b.kind for b in plan.backends] == [NSYS]
    assert windows(nsys) == [(1, 2), (5, 5)]
    for role in ("actor", "rollout", "ref", "critic"):
        targets = role_targets(nsys, role)
        assert [t.pattern for t in targets] == list(ROLE_PATTERNS[role])
        assert {(t.ranks, t.discrete) for t in targets} == {(frozenset({0, 1}), discrete)}
    assert role_targets(nsys, "reward_model") == []
    assert nsys.options_dict["capture-range-end"] == ("repeat" if discrete else "repeat:2")


@pytest.mark.parametrize(
    ("class_name", "role"),
    [
        ("ActorRolloutRefWorker", "actor"),
        ("ActorRolloutRefWorker", "rollout"),
        ("ActorRolloutRefWorker", "ref"),
        ("CriticWorker", "critic"),
        ("RewardModelWorker", "reward_model"),
        ("RmWorker", "reward_model"),
        ("PreferenceWorker", None),
        ("ReactorWorker", None),
    ],
)
def test_role_patterns_match_whole_words(class_name, role):
    identity = WorkerIdentity(class_name=class_name, actor_name=None, rank=0)
    for name, patterns in ROLE_PATTERNS.items():
        backend = BackendPlan(NSYS, tuple(Target(p) for p in patterns), None)
        matched = match_backend(backend, identity) is not None
        if name == role:
            assert matched, (class_name, name)
        elif role is None:
            assert not matched, (class_name, name)


def test_hybrid_worker_rank_union():
    nsys = plan_from_mapping(load(VERL_EN_SHARED)).backend(NSYS)
    worker = WorkerIdentity(class_name="ActorRolloutRefWorker", actor_name=None, rank=5)
    match = match_backend(nsys, worker)
    assert match is not None and match.target.pattern in ROLE_PATTERNS["rollout"]
    critic = WorkerIdentity(class_name="CriticWorker", actor_name=None, rank=1)
    assert match_backend(nsys, critic) is None


def test_verl_new_schema_global_profiler_and_worker_options():
    config = load(
        """
        global_profiler:
          _target_: verl.utils.profiler.ProfilerConfig
          tool: nsys
          steps: [2, 3]
          profile_continuous_steps: false
          save_path: outputs/profile
          global_tool_config:
            nsys:
              _target_: verl.utils.profiler.config.NsightToolConfig
              discrete: true
              controller_nsight_options:
                trace: cuda,nvtx,cublas,ucx
                cuda-memory-usage: "true"
                cuda-graph-trace: graph
              worker_nsight_options:
                trace: cuda,nvtx,cublas,ucx
                cuda-memory-usage: "true"
                cuda-graph-trace: graph
                capture-range: cudaProfilerApi
                capture-range-end: null
                kill: none
        actor_rollout_ref:
          hybrid_engine: true
          actor:
            strategy: fsdp
            profiler:
              _target_: verl.utils.profiler.ProfilerConfig
              tool: null
              enable: true
              all_ranks: true
              ranks: []
              save_path: null
              tool_config:
                nsys: {_target_: verl.utils.profiler.config.NsightToolConfig, discrete: null}
                torch: {step_start: 0, step_end: null, contents: [], discrete: false}
          ref:
            profiler: {enable: false, all_ranks: false, ranks: [0]}
        reward_model:
          enable: false
          profiler: {enable: false, all_ranks: false, ranks: []}
        """
    )
    nsys = plan_from_mapping(config).backend(NSYS)
    assert [t.pattern for t in nsys.targets] == list(ROLE_PATTERNS["actor"])
    assert all(t.ranks is None and t.discrete for t in nsys.targets)
    assert windows(nsys) == [(2, 2), (3, 3)]
    assert nsys.options_dict == {
        "t": "cuda,nvtx,cublas,ucx",
        "cuda-memory-usage": "true",
        "cuda-graph-trace": "graph",
        "kill": "none",
        "capture-range": "cudaProfilerApi",
        "capture-range-end": "repeat",
    }
    assert controller_nsys_options(config) == {
        "t": "cuda,nvtx,cublas,ucx",
        "cuda-memory-usage": "true",
        "cuda-graph-trace": "graph",
    }


def test_verl_trainer_level_nsight_options_and_continuous_steps():
    config = load(
        """
        trainer:
          profile_steps: [4, 5, 6]
          controller_nsight_options: {trace: "cuda,nvtx"}
          worker_nsight_options: {trace: "cuda,nvtx,osrt", capture-range-end: "repeat-shutdown:3"}
        critic:
          profiler: {all_ranks: true}
        """
    )
    nsys = plan_from_mapping(config).backend(NSYS)
    assert windows(nsys) == [(4, 6)]
    assert nsys.options_dict["t"] == "cuda,nvtx,osrt"
    assert nsys.options_dict["capture-range-end"] == "repeat-shutdown:3"
    assert controller_nsys_options(config) == {"t": "cuda,nvtx"}
    assert controller_nsys_options({"trainer": {"profile_steps": [1]}}) == {}


def test_verl_torch_tool_and_extensions():
    config = load(
        """
        global_profiler: {steps: [2], save_path: outputs/profile}
        actor_rollout_ref:
          actor:
            profiler:
              ranks: [0]
              discrete: true
              discrete_methods: [update_actor, compute_log_prob]
              patterns: ["*policy*"]
        critic:
          profiler:
            tool: torch
            ranks: [0]
            tool_config:
              torch: {contents: [cuda, memory, stack]}
        """
    )
    plan = plan_from_mapping(config)
    assert [b.kind for b in plan.backends] == [NSYS, TORCH]
    assert plan.backend(NSYS).targets == (
        Target("*policy*", frozenset({0}), discrete=True, methods=("update_actor", "compute_log_prob")),
    )
    torch = plan.backend(TORCH)
    assert patterns_of(torch) == ROLE_PATTERNS["critic"]
    assert windows(torch) == [(2, 2)]
    assert plan.torch == TorchSettings(directory="outputs/profile", profile_memory=True, with_stack=True)


def test_hybrid_engine_false_allows_different_discrete():
    config = load(VERL_ZH_DISCRETE)
    config["actor_rollout_ref"]["hybrid_engine"] = False
    config["actor_rollout_ref"]["ref"]["profiler"]["discrete"] = False
    nsys = plan_from_mapping(config).backend(NSYS)
    assert {t.discrete for t in role_targets(nsys, "ref")} == {False}


def test_explicit_capture_range_end_is_kept_when_it_covers_every_window():
    config = load(VERL_ZH_ONE_DATABASE)
    config["worker_nsight_options"] = {"capture-range-end": "repeat:5"}
    assert plan_from_mapping(config).backend(NSYS).options_dict["capture-range-end"] == "repeat:5"


# ---- RLinf examples ----


def test_rlinf_defaults_list_alone_is_not_a_profiling_config():
    with pytest.raises(ConfigError, match="no profiling section found"):
        plan_from_mapping(load(RLINF_DEFAULTS))


def test_rlinf_disabled_returns_base_unchanged():
    base = Plan(log_level="WARNING", sources=("x",))
    assert plan_from_mapping(load(RLINF_DISABLED), base=base) == base
    disabled_preset = with_preset(RLINF_DISABLED, RLINF_ONE_STEP.replace("enabled: true", "enabled: false"))
    assert plan_from_mapping(disabled_preset) == Plan()


def test_rlinf_fragments_without_worker_groups_profile_nothing():
    for text in (RLINF_OUTPUT_DIR, RLINF_ONE_STEP, RLINF_ROCPROF_ARGS, RLINF_ROCPROF_ENV):
        assert plan_from_mapping(load(text)) == Plan()


def test_rlinf_output_dir_example_over_preset():
    nsys = plan_from_mapping(with_preset(RLINF_OUTPUT_DIR)).backend(NSYS)
    assert nsys.output_dir == "/mnt/public/profiles/my_run"


def test_rlinf_default_output_dir_from_runner_logger():
    runner = {"logger": {"log_path": "../results", "experiment_name": "libero_spatial_ppo_openpi"}}
    nsys = plan_from_mapping(with_preset(runner=runner)).backend(NSYS)
    assert nsys.output_dir == "../results/libero_spatial_ppo_openpi/profiling"
    assert plan_from_mapping(with_preset()).backend(NSYS).output_dir is None


def test_rlinf_worker_groups_example():
    plan = plan_from_mapping(load(RLINF_WORKER_GROUPS))
    nsys = plan.backend(NSYS)
    assert [b.kind for b in plan.backends] == [NSYS]
    patterns = ("ActorGroup", "ActorGroup:*", "RolloutGroup", "RolloutGroup:*")
    assert nsys.targets == tuple(Target(p, rlinf_groups=True) for p in patterns)
    assert nsys.steps is None
    assert nsys.options_dict == {"t": "cuda,nvtx"}
    assert nsys.flags == ()


def test_rlinf_group_name_matches_rank_actors_only():
    nsys = plan_from_mapping(load(RLINF_WORKER_GROUPS)).backend(NSYS)
    assert match_backend(nsys, WorkerIdentity("EmbodiedFSDPActor", "ActorGroup:3", 3)) is not None
    assert match_backend(nsys, WorkerIdentity("ChannelWorker", "Actor:0", 0)) is None


def test_rlinf_default_preset_as_a_bare_section():
    nsys = plan_from_mapping(load(RLINF_PRESET)).backend(NSYS)
    assert patterns_of(nsys) == PRESET_GROUP_PATTERNS
    assert all(t.ranks is None and not t.discrete for t in nsys.targets)
    assert nsys.steps is None
    assert nsys.options == (
        ("t", "cuda,cudnn,cublas,nvtx,osrt"),
        ("sample", "process-tree"),
        ("cpuctxsw", "process-tree"),
        ("cudabacktrace", "all"),
        ("osrt-threshold", "1000"),
    )
    assert nsys.flags == ()


def test_rlinf_one_step_example_over_preset():
    nsys = plan_from_mapping(with_preset(RLINF_ONE_STEP)).backend(NSYS)
    assert windows(nsys) == [(3, 3)]
    assert nsys.options_dict["capture-range"] == "cudaProfilerApi"
    assert nsys.options_dict["capture-range-end"] == "stop"


def test_rlinf_many_steps_example_finalises_every_step():
    with pytest.raises(ConfigError, match=r"cluster\.profiling\.backend"):
        plan_from_mapping(load(RLINF_MANY_STEPS))
    nsys = plan_from_mapping(with_preset(RLINF_MANY_STEPS)).backend(NSYS)
    assert windows(nsys) == [(3, 3), (10, 10), (50, 50)]
    assert nsys.options_dict["capture-range-end"] == "repeat:3"


def test_rlinf_hydra_cli_step_override():
    config = OmegaConf.merge(with_preset(), OmegaConf.from_dotlist(["cluster.profiling.steps=[3]"]))
    assert windows(plan_from_mapping(config).backend(NSYS)) == [(3, 3)]


def test_rlinf_options_example_needs_steps_and_rejects_stop_for_several_steps():
    with pytest.raises(ConfigError, match=r"cluster\.profiling\.options\.capture-range=.*steps is null"):
        plan_from_mapping(load(RLINF_OPTIONS))
    nsys = plan_from_mapping(with_preset(RLINF_OPTIONS, RLINF_ONE_STEP)).backend(NSYS)
    assert nsys.flags == ("python-backtrace",)
    assert nsys.options_dict == {
        "t": "cuda,cudnn,cublas,nvtx,osrt",
        "sample": "process-tree",
        "cpuctxsw": "process-tree",
        "cudabacktrace": "all",
        "osrt-threshold": "1000",
        "backtrace": "fp",
        "capture-range": "cudaProfilerApi",
        "capture-range-end": "stop",
    }
    with pytest.raises(ConfigError, match=r"capture-range-end='stop'.*'repeat:N' with N >= 3"):
        plan_from_mapping(with_preset(RLINF_OPTIONS, RLINF_MANY_STEPS))


def test_rlinf_rocprof_minimal_example():
    plan = plan_from_mapping(load(RLINF_ROCPROF_MINIMAL))
    rocprof = plan.backend(ROCPROF)
    assert [b.kind for b in plan.backends] == [ROCPROF]
    assert patterns_of(rocprof) == PRESET_GROUP_PATTERNS[:6]
    assert rocprof.options == (("T", "hip"),)
    assert rocprof.steps is None and rocprof.env == ()


def test_rlinf_rocprof_args_and_env_examples_over_minimal():
    minimal = {"cluster": {"profiling": load(RLINF_ROCPROF_MINIMAL)}}
    config = OmegaConf.merge(minimal, load(RLINF_ROCPROF_ARGS), load(RLINF_ROCPROF_ENV))
    rocprof = plan_from_mapping(config).backend(ROCPROF)
    assert rocprof.options == (("T", "hip,hsa,rccl"), ("output-format", "json"))
    assert rocprof.env == (("ROCPROFSYS_SAMPLING_FREQ", "100"),)


def test_rlinf_switching_backend_ignores_the_other_backends_keys():
    config = with_preset(
        textwrap.dedent(
            """
            cluster:
              profiling:
                backend: rocprof_sys
                args: {T: hip}
            """
        )
    )
    rocprof = plan_from_mapping(config).backend(ROCPROF)
    assert rocprof.options == (("T", "hip"),)
    assert patterns_of(rocprof) == PRESET_GROUP_PATTERNS


def test_rlinf_torch_backend_sets_torch_directory():
    """In a bare section of nrlprof's own file: RLinf's Cluster refuses `backend: torch` in cluster.profiling."""
    config = {"backend": "torch", "worker_groups": ["ActorGroup"], "steps": [2, 3], "output_dir": "/shared/traces"}
    plan = plan_from_mapping(config, base=Plan(torch=TorchSettings(record_shapes=True)))
    torch = plan.backend(TORCH)
    assert windows(torch) == [(2, 3)] and torch.output_dir == "/shared/traces"
    assert plan.torch == TorchSettings(directory="/shared/traces", record_shapes=True)


def test_both_styles_in_one_config():
    config = load(VERL_ZH_ONE_DATABASE)
    config["cluster"] = {"profiling": load(RLINF_ROCPROF_MINIMAL)}
    plan = plan_from_mapping(config)
    assert sorted(b.kind for b in plan.backends) == [NSYS, ROCPROF]
    config["cluster"]["profiling"]["backend"] = "nsight"
    with pytest.raises(ConfigError, match="both configure nsys"):
        plan_from_mapping(config)


# ---- OmegaConf, files, env precedence ----


def test_omegaconf_input_with_interpolation():
    config = OmegaConf.create(
        {
            "global_profiler": {"tool": "nsys", "steps": [1]},
            "critic": {"profiler": {"tool": "${global_profiler.tool}", "ranks": [0, 1]}},
        }
    )
    nsys = plan_from_mapping(config).backend(NSYS)
    assert {t.ranks for t in nsys.targets} == {frozenset({0, 1})}


def test_omegaconf_unresolvable_interpolation():
    config = OmegaConf.create({"trainer": {"profile_steps": "${missing.key}"}})
    with pytest.raises(ConfigError, match="interpolations resolve"):
        plan_from_mapping(config)


FULL_RLINF_FILE = """
runner:
  logger:
    log_path: ../results
    experiment_name: run1
cluster:
  num_nodes: 1
  profiling:
    backend: nsight
    worker_groups: [ActorGroup]
    steps: [3, 4]
"""


def test_plan_from_file_whole_and_section(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(FULL_RLINF_FILE)
    whole = plan_from_file(str(path))
    section = plan_from_file(f"{path}:cluster.profiling")
    for plan in (whole, section):
        nsys = plan.backend(NSYS)
        assert windows(nsys) == [(3, 4)]
        assert nsys.output_dir == "../results/run1/profiling"
        assert nsys.options_dict["capture-range-end"] == "stop"
    assert section.sources == (f"file:{path}:cluster.profiling:nsys",)


def test_plan_from_file_section_errors_name_the_file_and_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(FULL_RLINF_FILE.replace("nsight", "nsys"))
    with pytest.raises(ConfigError) as err:
        plan_from_file(f"{path}:cluster.profiling")
    assert f"{path}:cluster.profiling.backend='nsys'" in str(err.value)


def test_plan_from_file_resolves_interpolations(tmp_path):
    path = tmp_path / "verl.yaml"
    path.write_text(
        textwrap.dedent(
            """
            global_profiler: {tool: nsys, steps: [1, 2]}
            actor_rollout_ref:
              actor:
                profiler:
                  tool: ${oc.select:global_profiler.tool,null}
                  ranks: [0]
            """
        )
    )
    assert windows(plan_from_file(str(path)).backend(NSYS)) == [(1, 2)]


@pytest.mark.parametrize(
    ("content", "suffix", "detail"),
    [
        (None, "", "no file"),
        (None, ":cluster.profiling", "no file"),
        ("cluster: {profiling: [1]\n", "", "invalid YAML"),
        ("", "", "does not hold a mapping"),
        ("- 1\n- 2\n", "", "does not hold a mapping"),
        (FULL_RLINF_FILE, ":cluster.profilng", "no key 'cluster.profilng'"),
        (FULL_RLINF_FILE, ":cluster.num_nodes", "is not a mapping"),
    ],
)
def test_plan_from_file_errors(tmp_path, content, suffix, detail):
    path = tmp_path / "cfg.yaml"
    if content is not None:
        path.write_text(content)
    spec = f"{path}{suffix}"
    with pytest.raises(ConfigError) as err:
        plan_from_file(spec)
    message = str(err.value)
    assert err.value.source == "NRL_PROFILE_CONFIG"
    assert err.value.value == spec
    assert detail in message
    assert "'path/to/config.yaml:dotted.key'" in message


def test_plan_from_file_directory_is_unreadable(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        plan_from_file(str(tmp_path))


def test_env_overrides_replace_the_nsys_backend_from_yaml():
    torch_section = {"backend": "torch", "worker_groups": ["ActorGroup"], "steps": [2], "output_dir": "/shared/traces"}
    from_yaml = plan_from_mapping(torch_section, base=plan_from_mapping(load(VERL_EN_SHARED)))
    environ = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}
    plan = plan_from_env(environ, base=from_yaml)
    assert plan.backend(NSYS).targets == (Target("*policy*"),)
    assert plan.backend(NSYS).steps == StepSelection((Window(3, 4),))
    assert plan.backend(TORCH) == from_yaml.backend(TORCH)
    assert plan.torch.directory == "/shared/traces"
    assert plan.sources == ("yaml:nsys", "yaml:torch", "env:nsys")
    assert plan_from_env({"NRL_TORCH_PROFILE_DIR": "elsewhere"}, base=from_yaml).torch.directory == "elsewhere"


def test_load_plan_reads_the_config_file_then_env(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(FULL_RLINF_FILE)
    plan = load_plan({"NRL_PROFILE_CONFIG": f"{path}:cluster.profiling", "NRL_PROFILE_LOG_LEVEL": "debug"})
    groups = (Target("ActorGroup", rlinf_groups=True), Target("ActorGroup:*", rlinf_groups=True))
    assert plan.backend(NSYS).targets == groups
    assert plan.log_level == "DEBUG"


# ---- misconfiguration table: each error names the key path and the expected form ----


def rlinf(**profiling) -> dict:
    return {"cluster": {"profiling": {"backend": "nsight", "worker_groups": ["ActorGroup"], **profiling}}}


def verl_actor(profiler: dict, steps: object = (1,), **top) -> dict:
    return {"trainer": {"profile_steps": list(steps)}, "actor_rollout_ref": {"actor": {"profiler": profiler}}, **top}


MISCONFIGURATIONS = [
    (
        "missing backend",
        {"cluster": {"profiling": {"worker_groups": ["A"]}}},
        "cluster.profiling.backend=None",
        "'nsight'",
    ),
    ("unknown backend", rlinf(backend="nsys"), "cluster.profiling.backend='nsys'", "'rocprof_sys'"),
    ("typo in RLinf key", rlinf(enabeld=True), "cluster.profiling.enabeld", "did you mean 'enabled'?"),
    ("enabled not a bool", rlinf(enabled="yes"), "cluster.profiling.enabled='yes'", "true or false"),
    ("groups not names", rlinf(worker_groups={"Actor": 1}), "cluster.profiling.worker_groups", "a list of group names"),
    ("steps not ints", rlinf(steps=[1, "two"]), "cluster.profiling.steps", "a non-empty list of step numbers"),
    ("step below RLinf's first", rlinf(steps=[-1, 1]), "cluster.profiling.steps", "step numbers >= 0"),
    ("o and output", rlinf(options={"o": "a", "output": "b"}), "cluster.profiling.options.output", "only one of 'o'"),
    (
        "flag and option",
        rlinf(options={"backtrace": "fp"}, flags=["backtrace"]),
        "cluster.profiling.flags",
        "only one of 'flags' and 'options'",
    ),
    ("flags not a list", rlinf(flags="python-backtrace"), "cluster.profiling.flags", "a list of bare nsys flags"),
    ("option value a list", rlinf(options={"t": ["cuda"]}), "cluster.profiling.options.t", "a string, finite number"),
    (
        "capture range without steps",
        rlinf(options={"capture-range": "cudaProfilerApi"}),
        "cluster.profiling.options.capture-range",
        "no capture-range option while steps is null",
    ),
    ("torch where RLinf reads it", rlinf(backend="torch"), "cluster.profiling.backend='torch'", "Cluster refuses"),
    (
        "torch without steps",
        {"backend": "torch", "worker_groups": ["ActorGroup"]},
        "steps=None",
        "a list of RLinf step numbers >= 0 such as [3]",
    ),
    (
        "rocprof env not scalar",
        rlinf(backend="rocprof_sys", env={"X": {"a": 1}}),
        "cluster.profiling.env.X",
        "a string, finite number or boolean",
    ),
    ("output_dir not a string", rlinf(output_dir=3), "cluster.profiling.output_dir=3", "a non-empty string"),
    (
        "ranks as a string",
        verl_actor({"ranks": "0,1"}),
        "actor_rollout_ref.actor.profiler.ranks='0,1'",
        "a list of ranks",
    ),
    ("negative rank", verl_actor({"ranks": [-1]}), "actor_rollout_ref.actor.profiler.ranks", "a list of ranks >= 0"),
    (
        "typo in profiler key",
        verl_actor({"rank": [0]}),
        "actor_rollout_ref.actor.profiler.rank",
        "did you mean 'ranks'?",
    ),
    (
        "all_ranks not a bool",
        verl_actor({"all_ranks": "True"}),
        "actor_rollout_ref.actor.profiler.all_ranks",
        "true or",
    ),
    (
        "enable without ranks",
        verl_actor({"enable": True}),
        "actor_rollout_ref.actor.profiler.enable",
        "all_ranks: true or a non-empty ranks list",
    ),
    (
        "unsupported tool",
        verl_actor({"tool": "npu", "ranks": [0]}),
        "actor_rollout_ref.actor.profiler.tool",
        "'nsys', 'torch' or 'torch_memory'",
    ),
    (
        "unknown tool",
        verl_actor({"tool": "nsight", "ranks": [0]}),
        "actor_rollout_ref.actor.profiler.tool",
        "one of nsys",
    ),
    (
        "typo in tool_config",
        verl_actor({"ranks": [0], "tool_config": {"nsy": {}}}),
        "actor_rollout_ref.actor.profiler.tool_config.nsy",
        "did you mean 'nsys'?",
    ),
    (
        "torch mini-batch gating",
        verl_actor({"tool": "torch", "ranks": [0], "tool_config": {"torch": {"step_start": 2}}}),
        "actor_rollout_ref.actor.profiler.tool_config.torch.step_start",
        "step_start 0 and step_end null",
    ),
    (
        "discrete_methods without discrete",
        verl_actor({"ranks": [0], "discrete_methods": ["update_actor"]}),
        "actor_rollout_ref.actor.profiler.discrete_methods",
        "no discrete_methods unless discrete is true",
    ),
    (
        "patterns and worker_patterns",
        verl_actor({"ranks": [0], "patterns": ["a"], "worker_patterns": ["b"]}),
        "actor_rollout_ref.actor.profiler.worker_patterns",
        "only one of patterns and worker_patterns",
    ),
    (
        "old and new style",
        {"actor_rollout_ref": {"actor": {"profile_ranks": [0], "profiler": {"ranks": [0]}}}},
        "actor_rollout_ref.actor.profile_ranks",
        "either actor_rollout_ref.actor.profiler or the old keys",
    ),
    (
        "old-style bool as string",
        {"critic": {"profile_ranks_all": "true"}},
        "critic.profile_ranks_all='true'",
        "true or false",
    ),
    (
        "critic configured twice",
        {"critic": {"profile_ranks": [0]}, "actor_rollout_ref": {"critic": {"profile_ranks": [1]}}},
        "actor_rollout_ref.critic",
        "the critic role profiled from one place only",
    ),
    (
        "hybrid discrete mismatch",
        {
            "trainer": {"profile_steps": [1]},
            "actor_rollout_ref": {
                "actor": {"profiler": {"discrete": True, "ranks": [0]}},
                "ref": {"profiler": {"discrete": False, "ranks": [0]}},
            },
        },
        "actor_rollout_ref.ref.profiler.discrete=False",
        "the same discrete setting for every profiled role",
    ),
    (
        "hybrid_engine not a bool",
        {"actor_rollout_ref": {"hybrid_engine": "yes"}},
        "actor_rollout_ref.hybrid_engine='yes'",
        "true or false",
    ),
    (
        "typo in global_profiler",
        {"global_profiler": {"step": [1]}},
        "global_profiler.step",
        "did you mean 'steps'?",
    ),
    (
        "typo in global nsys config",
        {"global_profiler": {"global_tool_config": {"nsys": {"worker_nsight_option": {}}}}},
        "global_profiler.global_tool_config.nsys.worker_nsight_option",
        "did you mean 'worker_nsight_options'?",
    ),
    (
        "continuous steps not a bool",
        {"global_profiler": {"profile_continuous_steps": "no"}},
        "global_profiler.profile_continuous_steps='no'",
        "true or false",
    ),
    ("profile_steps a word", {"trainer": {"profile_steps": "all"}}, "trainer.profile_steps", "'start:stop'"),
    ("profile_steps a number", {"trainer": {"profile_steps": 3}}, "trainer.profile_steps=3", "a list of step numbers"),
    (
        "steps in two places disagree",
        {"trainer": {"profile_steps": [1]}, "global_profiler": {"steps": [2]}},
        "global_profiler.steps=[2]",
        "the same steps as trainer.profile_steps",
    ),
    (
        "capture range changed",
        verl_actor({"ranks": [0]}, worker_nsight_options={"capture-range": "nvtx"}),
        "worker_nsight_options.capture-range='nvtx'",
        "'cudaProfilerApi'",
    ),
    (
        "capture range removed",
        verl_actor({"ranks": [0]}, worker_nsight_options={"capture-range": None}),
        "worker_nsight_options.capture-range=None",
        "'cudaProfilerApi'",
    ),
    (
        "stop drops windows",
        verl_actor({"ranks": [0]}, steps=(1, 5), worker_nsight_options={"capture-range-end": "stop"}),
        "worker_nsight_options.capture-range-end='stop'",
        "'repeat:N' with N >= 2",
    ),
    (
        "capture-range-end nonsense",
        verl_actor({"ranks": [0]}, worker_nsight_options={"capture-range-end": "sometimes"}),
        "worker_nsight_options.capture-range-end='sometimes'",
        "'repeat-shutdown:N'",
    ),
    (
        "worker options not a mapping",
        verl_actor({"ranks": [0]}, worker_nsight_options=["t=cuda"]),
        "worker_nsight_options=['t=cuda']",
        "a mapping",
    ),
    (
        "nsight options in two places disagree",
        verl_actor({"ranks": [0]}, worker_nsight_options={"t": "cuda"})
        | {"trainer": {"profile_steps": [1], "worker_nsight_options": {}}},
        "trainer.worker_nsight_options",
        "the same options as worker_nsight_options",
    ),
    ("nothing recognisable", {"data": {"train_files": "x"}}, "config=['data']", "a verl config"),
    ("not a mapping", [1, 2], "config=[1, 2]", "a mapping"),
]


@pytest.mark.parametrize(
    ("config", "key_path", "expected"),
    [case[1:] for case in MISCONFIGURATIONS],
    ids=[case[0] for case in MISCONFIGURATIONS],
)
def test_misconfiguration_names_key_path_and_expected_form(config, key_path, expected):
    with pytest.raises(ConfigError) as err:
        plan_from_mapping(config)
    message = str(err.value)
    assert key_path in message
    assert expected in message
    assert err.value.expected in message


def test_no_assert_statements_in_validation():
    modules = sorted(Path(nrlprof.config.__file__).parent.glob("*.py"))
    assert len(modules) >= 10
    for module in modules:
        tree = ast.parse(module.read_text())
        assert not any(isinstance(node, ast.Assert) for node in ast.walk(tree)), module.name
