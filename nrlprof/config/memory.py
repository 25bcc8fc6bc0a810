"""The memory backend's settings: allocator history length and snapshot-on-OOM, as BackendPlan options."""

from __future__ import annotations

from nrlprof.errors import ConfigError

DEFAULT_MEMORY_DIR = "memory_profile"
# torch's own default keeps every allocator event; 100,000 is a few tens of MB and covers several steps.
DEFAULT_MAX_ENTRIES = 100_000
MAX_ENTRIES_LIMIT = 100_000_000
MAX_ENTRIES_FORM = f"a whole number of allocator events from 1 to {MAX_ENTRIES_LIMIT}, such as {DEFAULT_MAX_ENTRIES}"


def parse_max_entries(text: str, source: str) -> int:
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(MAX_ENTRIES_LIMIT)):
        raise ConfigError(source, text[:200], MAX_ENTRIES_FORM)
    entries = int(value)
    if not 1 <= entries <= MAX_ENTRIES_LIMIT:
        raise ConfigError(source, text, MAX_ENTRIES_FORM)
    return entries


def memory_options(max_entries: int, on_oom: bool) -> tuple[tuple[str, str], ...]:
    return (("max_entries", str(max_entries)), ("on_oom", "1" if on_oom else "0"))


def memory_settings(options: dict[str, str]) -> tuple[int, bool]:
    """(max_entries, on_oom) from a memory BackendPlan's options."""
    return int(options.get("max_entries", DEFAULT_MAX_ENTRIES)), options.get("on_oom") == "1"
