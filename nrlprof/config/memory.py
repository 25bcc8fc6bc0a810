"""The memory backend's settings: allocator history length, snapshot-on-OOM and the stacks recorded, as BackendPlan
options."""

from __future__ import annotations

from nrlprof.errors import ConfigError

DEFAULT_MEMORY_DIR = "memory_profile"
# torch's own default keeps every allocator event; 100,000 is a few tens of MB and covers several steps.
DEFAULT_MAX_ENTRIES = 100_000
MAX_ENTRIES_LIMIT = 100_000_000
MAX_ENTRIES_FORM = f"a whole number of allocator events from 1 to {MAX_ENTRIES_LIMIT}, such as {DEFAULT_MAX_ENTRIES}"
# torch's `stacks`: Python frames only (a dump takes seconds), or C++ frames too (minutes: torchtitan #3628).
PYTHON_STACKS, ALL_STACKS = "python", "all"
STACKS_FORM = f"'{PYTHON_STACKS}' (Python frames, the default) or '{ALL_STACKS}' (C++ frames too; dumps are far slower)"


def parse_max_entries(text: str, source: str) -> int:
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(MAX_ENTRIES_LIMIT)):
        raise ConfigError(source, text[:200], MAX_ENTRIES_FORM)
    entries = int(value)
    if not 1 <= entries <= MAX_ENTRIES_LIMIT:
        raise ConfigError(source, text, MAX_ENTRIES_FORM)
    return entries


def parse_stacks(text: str, source: str) -> str:
    value = text.strip().lower()
    if value not in (PYTHON_STACKS, ALL_STACKS):
        raise ConfigError(source, text[:200], STACKS_FORM)
    return value


def memory_options(max_entries: int, on_oom: bool, stacks: str = PYTHON_STACKS) -> tuple[tuple[str, str], ...]:
    options = (("max_entries", str(max_entries)), ("on_oom", "1" if on_oom else "0"))
    return options if stacks == PYTHON_STACKS else (*options, ("stacks", stacks))


def memory_settings(options: dict[str, str]) -> tuple[int, bool, str]:
    """(max_entries, on_oom, stacks) from a memory BackendPlan's options."""
    stacks = options.get("stacks", PYTHON_STACKS)
    return int(options.get("max_entries", DEFAULT_MAX_ENTRIES)), options.get("on_oom") == "1", stacks
