"""Whether an inference engine's own torch profiler is switched on, where it writes, and how to switch it.

- vLLM 0.16 and later: the engine's `profiler_config` (engine argument `profiler_config`, command line
  `--profiler-config`), read from the engine object itself (`LLM.llm_engine.vllm_config`, `AsyncLLM.vllm_config`).
  Only `profiler='torch'` records torch traces (`cuda` and `proton` are other tools). `VLLM_TORCH_PROFILER_DIR`
  means nothing there: vLLM refuses `start_profile()` unless `profiler_config` is set.
- vLLM before 0.16: `VLLM_TORCH_PROFILER_DIR` in the worker's environment.
- SGLang: `start_profile()` always works; it writes where `output_dir` (or the scheduler's
  SGLANG_TORCH_PROFILER_DIR, else /tmp) says. Its profiler counts as switched on where the worker's environment
  sets SGLANG_TORCH_PROFILER_DIR, and nrlprof then passes that directory as `output_dir`.

Nothing is imported: the engine's package is known from its class, its configuration read from its attributes.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

VLLM_VARIABLE = "VLLM_TORCH_PROFILER_DIR"
SGLANG_VARIABLE = "SGLANG_TORCH_PROFILER_DIR"
# The module that holds `ProfilerConfig` in vLLM 0.16 and later (imported with `vllm.config`).
VLLM_PROFILER_CONFIG_MODULE = "vllm.config.profiler"
# vLLM's and SGLang's `profile_prefix`: 1-128 ASCII letters, digits, `.`, `_`, `-`, beginning with a letter or digit.
PREFIX_LENGTH = 128
_PREFIX_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class OwnProfiler:
    """An engine's own torch profiler, switched on: its files go under `directory`; `source` says what set it."""

    directory: str
    source: str
    start_arguments: dict[str, Any] = field(default_factory=dict)


def engine_package(engine: object) -> str:
    return type(engine).__module__.partition(".")[0]


def own_profiler(engine: object, environ: Mapping[str, str], prefix: str) -> OwnProfiler | None:
    """The engine's own torch profiler where it is switched on; None where it is off (nrlprof records instead)."""
    package = engine_package(engine)
    if package == "vllm":
        return _vllm(engine, environ, prefix)
    if package == "sglang":
        return _sglang(engine, environ, prefix)
    return None


def stale_variable(engine: object, environ: Mapping[str, str]) -> str | None:
    """A variable set for an engine that no longer reads it (vLLM >= 0.16 and VLLM_TORCH_PROFILER_DIR)."""
    if engine_package(engine) != "vllm" or not (environ.get(VLLM_VARIABLE) or "").strip():
        return None
    return VLLM_VARIABLE if _reads_profiler_config(engine) else None


def _vllm(engine: object, environ: Mapping[str, str], prefix: str) -> OwnProfiler | None:
    arguments = {"profile_prefix": prefix} if _accepts(engine.start_profile, "profile_prefix") else {}
    if _reads_profiler_config(engine):
        settings = getattr(vllm_config(engine), "profiler_config", None)
        if settings is None or getattr(settings, "profiler", None) != "torch":
            return None
        directory = str(getattr(settings, "torch_profiler_dir", "") or "")
        return OwnProfiler(directory, f"vLLM's profiler_config (torch_profiler_dir={directory})", arguments)
    directory = (environ.get(VLLM_VARIABLE) or "").strip()
    return OwnProfiler(directory, f"{VLLM_VARIABLE}={directory}", arguments) if directory else None


def _sglang(engine: object, environ: Mapping[str, str], prefix: str) -> OwnProfiler | None:
    directory = (environ.get(SGLANG_VARIABLE) or "").strip()
    if not directory:
        return None
    arguments: dict[str, Any] = {}
    for name, value in (("output_dir", directory), ("profile_prefix", prefix)):
        if _accepts(engine.start_profile, name):
            arguments[name] = value
    return OwnProfiler(directory, f"{SGLANG_VARIABLE}={directory}", arguments)


def vllm_config(engine: object) -> object | None:
    """The engine's `VllmConfig`: on `AsyncLLM` and `LLMEngine` itself, on `LLM` under `llm_engine`."""
    for owner in (engine, getattr(engine, "llm_engine", None)):
        config = getattr(owner, "vllm_config", None)
        if config is not None:
            return config
    return None


def _reads_profiler_config(engine: object) -> bool:
    """vLLM 0.16 or later: its config has `profiler_config` (or, config not found, vLLM has the module for it)."""
    config = vllm_config(engine)
    if config is not None:
        return hasattr(config, "profiler_config")
    return VLLM_PROFILER_CONFIG_MODULE in sys.modules


def _accepts(method: Any, name: str) -> bool:
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def profile_prefix(worker: str, rank: int | None, window: str) -> str:
    """`<worker>.rank<r>.steps<window>`, in the characters vLLM and SGLang take for a trace name's prefix."""
    text = _PREFIX_UNSAFE.sub("_", f"{worker}.rank{rank if rank is not None else 0}.steps{window}")
    text = text.lstrip("._-") or "nrlprof"
    return text[:PREFIX_LENGTH]
