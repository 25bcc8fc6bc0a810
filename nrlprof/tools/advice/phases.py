"""Which RL phase a worker's method belongs to: the frameworks' own method names, and NRL_PHASES / --phases.

A rule is `<phase>=<pattern>`, the pattern an fnmatch pattern over the method name, or over
`<worker>.<method>` when it holds a dot (the worker as the step anatomy names it, `policy_model_actor`,
`worker_dict`). The user's rules come first, then the built-in ones, in order: the first rule that matches wins,
so a fused verl name such as `actor_rollout_compute_log_prob` is a log-prob pass, not rollout.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from nrlprof.config.variables import PHASES_VARIABLE
from nrlprof.errors import ConfigError

ROLLOUT, LOGPROB, TRAINING, WEIGHT_SYNC, REWARD, OTHER = (
    "rollout", "logprob", "training", "weight_sync", "reward", "other",
)  # fmt: skip
PHASES = (ROLLOUT, LOGPROB, TRAINING, WEIGHT_SYNC, REWARD)
PHASE_LABELS = {
    ROLLOUT: "rollout (generation)",
    LOGPROB: "log-prob, reference and value passes",
    TRAINING: "training",
    WEIGHT_SYNC: "weight sync (refit, reshard, engine wake-up and sleep)",
    REWARD: "reward",
    OTHER: "other calls",
}
EXPECTED = (
    "rules '<phase>=<pattern>' separated by ';' (a pattern over the method, or '<worker>.<method>'; "
    f"phases: {', '.join(PHASES)}, {OTHER}), e.g. 'rollout=*generate*;training=*train*'"
)

# (phase, pattern) in order of precedence; read from each framework's code (verl 0.9.1's trainer and engine workers,
# NeMo RL's algorithms, OpenRLHF 0.11.2's PPO trainer, RLinf 0.3.0's runners, SkyRL 0.4.0's worker groups, AReaL
# 1.0.4's RPC servers, slime's train actors and rollout manager, vLLM's and SGLang's engines).
BUILT_IN: tuple[tuple[str, str], ...] = (
    # Weight sync: NeMo RL's refit, verl's checkpoint engine, OpenRLHF's broadcast, RLinf's reshard, engines' own.
    (WEIGHT_SYNC, "*update_weight*"),
    (WEIGHT_SYNC, "*refit*"),
    (WEIGHT_SYNC, "*broadcast_to_vllm*"),
    (WEIGHT_SYNC, "*broadcast_weights*"),
    (WEIGHT_SYNC, "*weights_for_ipc*"),
    (WEIGHT_SYNC, "*sync_model*"),
    (WEIGHT_SYNC, "*sync_weight*"),
    (WEIGHT_SYNC, "*weights_update_group*"),
    (WEIGHT_SYNC, "*memory_occupation*"),
    (WEIGHT_SYNC, "*wake_up*"),
    (WEIGHT_SYNC, "*sleep_replicas*"),
    (WEIGHT_SYNC, "sleep"),
    (WEIGHT_SYNC, "prepare_for_generation"),
    (WEIGHT_SYNC, "finish_generation"),
    (WEIGHT_SYNC, "offload_engine"),
    (WEIGHT_SYNC, "*to_inference_engines*"),  # SkyRL's broadcast_to_inference_engines
    (WEIGHT_SYNC, "offload_to_cpu"),  # SkyRL's colocated workers move their weights around the sync
    (WEIGHT_SYNC, "backload_to_gpu"),
    # Reward: verl's reward model and reward loop, RLinf's reward workers, OpenRLHF's reward model.
    (REWARD, "*rm_score*"),
    (REWARD, "*reward*"),
    (REWARD, "compute_score*"),
    (REWARD, "*reward*.execute_batch"),
    (REWARD, "*reward*.forward"),
    (REWARD, "*reward*.call"),  # AReaL: every engine method goes through its RPC server's `call`
    # Log-prob, reference and value passes.
    (LOGPROB, "*log_prob*"),
    (LOGPROB, "*logprob*"),
    (LOGPROB, "*compute_values*"),
    (LOGPROB, "infer_batch"),
    (LOGPROB, "run_inference"),
    (LOGPROB, "*.execute_batch"),
    (LOGPROB, "*reference*.forward"),
    (LOGPROB, "*critic*.forward"),
    (LOGPROB, "forward"),  # SkyRL's policy, ref and critic forward passes (no backward)
    (LOGPROB, "ref.call"),  # AReaL's reference role: compute_logp only
    (LOGPROB, "teacher.call"),
    # Training.
    (TRAINING, "*update_actor*"),
    (TRAINING, "*update_critic*"),
    (TRAINING, "*update_policy*"),
    (TRAINING, "*train*"),
    (TRAINING, "fit"),
    (TRAINING, "*optimizer_step*"),
    (TRAINING, "*forward_backward*"),  # SkyRL
    (TRAINING, "optim_step"),
    # Rollout: generation, its engines' calls, environment interaction (RLinf's embodied runners).
    (ROLLOUT, "*generate*"),
    (ROLLOUT, "*rollout*"),
    (ROLLOUT, "add_requests"),
    (ROLLOUT, "get_responses"),
    (ROLLOUT, "chat"),
    (ROLLOUT, "interact"),
    (ROLLOUT, "rollout*.call"),  # AReaL's rollout role
)


@dataclass(frozen=True)
class PhaseRule:
    phase: str
    pattern: str

    def matches(self, worker: str, method: str) -> bool:
        if "." in self.pattern:
            worker_pattern, _, method_pattern = self.pattern.rpartition(".")
            return fnmatch.fnmatchcase(worker, worker_pattern) and fnmatch.fnmatchcase(method, method_pattern)
        return fnmatch.fnmatchcase(method, self.pattern)


class PhaseMap:
    """The phase of each (worker, method): the user's rules first, then the built-in ones; `other` when none."""

    def __init__(self, user_rules: Iterable[PhaseRule] = ()) -> None:
        self.rules = (*user_rules, *(PhaseRule(phase, pattern) for phase, pattern in BUILT_IN))
        self._seen: dict[tuple[str, str], str] = {}

    def phase_of(self, worker: str, method: str) -> str:
        key = (worker, method)
        found = self._seen.get(key)
        if found is None:
            found = next((rule.phase for rule in self.rules if rule.matches(worker, method)), OTHER)
            self._seen[key] = found
        return found


def parse_rules(text: str, source: str) -> list[PhaseRule]:
    """`rollout=*generate*;training=*train*` as rules; ConfigError naming `source` on a bad one."""
    rules = []
    for part in filter(None, (piece.strip() for piece in re.split(r"[;\n]", text))):
        phase, equals, patterns = part.partition("=")
        phase = phase.strip().lower().replace("-", "_")
        if not equals or phase not in (*PHASES, OTHER):
            raise ConfigError(source, text, EXPECTED, f"{part!r} names no phase")
        for pattern in filter(None, (p.strip() for p in patterns.split(","))):
            if pattern.endswith(".") or pattern.startswith("."):
                raise ConfigError(source, text, EXPECTED, f"{pattern!r} has an empty worker or method")
            rules.append(PhaseRule(phase, pattern))
        if not patterns.strip():
            raise ConfigError(source, text, EXPECTED, f"{part!r} has no pattern")
    return rules


@cache
def _cached_map(option: str | None, variable: str | None) -> PhaseMap:
    rules = parse_rules(option, "--phases") if option else []
    rules += parse_rules(variable, PHASES_VARIABLE) if variable else []
    return PhaseMap(rules)


def phase_map(option: str | None = None, environ: Mapping[str, str] | None = None) -> PhaseMap:
    """The phases of this run: `--phases` first, then NRL_PHASES, then the built-in names."""
    environ = os.environ if environ is None else environ
    variable = (environ.get(PHASES_VARIABLE) or "").strip() or None
    return _cached_map((option or "").strip() or None, variable)
