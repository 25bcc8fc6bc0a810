"""NRL_PROFILE_MAX_HOST_MB: how much host memory a process may grow by during one torch window before nrlprof stops
that window early (its trace kept, its record `truncated`). Unset: a share of the node's memory per process; `0` or
`off`: no budget."""

from __future__ import annotations

from nrlprof.errors import ConfigError

HOST_BUDGET_VARIABLE = "NRL_PROFILE_MAX_HOST_MB"
# The default: this share of the node's memory per profiled process (64 GB on a 2 TB node; 16 such processes
# on one node hold at most half of it).
NODE_SHARE = 32
MIN_DEFAULT_MB = 1024  # a small node's share is at least this
MAX_HOST_MB = 1 << 30
OFF = 0
HOST_BUDGET_FORM = "a whole number of MB such as 4096, or 0 / 'off' for no budget"


def parse_host_budget(text: str, source: str = HOST_BUDGET_VARIABLE) -> int:
    """MB, or OFF."""
    value = text.strip().lower()
    if value == "off":
        return OFF
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(MAX_HOST_MB)) or int(value) > MAX_HOST_MB:
        raise ConfigError(source, text[:200], HOST_BUDGET_FORM)
    return int(value)


def node_memory_mb(meminfo: str = "/proc/meminfo") -> int | None:
    try:
        with open(meminfo, "rb") as handle:
            for line in handle:
                if line.startswith(b"MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_budget_mb(setting: int | None, meminfo: str = "/proc/meminfo") -> int | None:
    """The budget of this process in MB (None: none): the setting, else the node's share."""
    if setting is not None:
        return setting or None
    total = node_memory_mb(meminfo)
    return None if total is None else max(MIN_DEFAULT_MB, total // NODE_SHARE)
