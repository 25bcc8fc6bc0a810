"""`nsys profile` command line: split into recorded options and the command, and read the ones the stand-in obeys."""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field

SHORT_NAMES = {"-o": "output", "-f": "force-overwrite", "-t": "trace", "-s": "sample", "-c": "capture-range",
               "-x": "stop-on-exit", "-e": "env-var", "-b": "backtrace", "-d": "duration", "-y": "delay"}  # fmt: skip
# Long options that take their value as the next word when written without `=`.
LONG_WITH_VALUE = {"output", "force-overwrite", "trace", "sample", "cpuctxsw", "capture-range",
                   "capture-range-end", "stop-on-exit", "cuda-memory-usage", "kill", "env-var", "backtrace",
                   "duration", "delay", "session", "session-new"}  # fmt: skip
RANGE_ENDS = ("none", "stop", "stop-shutdown", "repeat", "repeat-shutdown")


class UsageError(Exception):
    """Bad command line: nsys prints a message and exits 1."""


@dataclass
class ProfileOptions:
    options: list[str]
    command: list[str]
    values: dict[str, str] = field(default_factory=dict)

    @property
    def output(self) -> str:
        return self.values.get("output", "report%n")

    @property
    def force_overwrite(self) -> bool:
        return _boolean(self.values.get("force-overwrite", "false"), "--force-overwrite")

    @property
    def traces_nvtx(self) -> bool:
        trace = self.values.get("trace")
        return trace is None or "nvtx" in trace.split(",")

    @property
    def capture_range(self) -> str:
        value = self.values.get("capture-range", "none")
        if value not in ("none", "cudaProfilerApi"):
            raise UsageError(f"--capture-range={value}: the stand-in supports none and cudaProfilerApi")
        return value

    @property
    def range_end(self) -> tuple[str, int | None]:
        """(kind, K): kind one of RANGE_ENDS; K the number of ranges for repeat[-shutdown], else None."""
        value = self.values.get("capture-range-end", "stop-shutdown")
        kind, _, count = value.partition(":")
        if kind not in RANGE_ENDS or (count and kind not in ("repeat", "repeat-shutdown")):
            raise UsageError(f"--capture-range-end={value}: expected none, stop, stop-shutdown, repeat[:N], "
                             "repeat-shutdown:N")  # fmt: skip
        if kind == "repeat-shutdown" and not count:
            raise UsageError(f"--capture-range-end={value}: repeat-shutdown needs a count, e.g. repeat-shutdown:2")
        if count and (not count.isdecimal() or int(count) < 1):
            raise UsageError(f"--capture-range-end={value}: the count must be a positive integer")
        return kind, int(count) if count else None

    @property
    def kill_signal(self) -> int | None:
        value = self.values.get("kill", "sigterm").lower()
        names = {"none": None, "sigterm": 15, "sigkill": 9, "sigint": 2}
        if value in names:
            return names[value]
        if value.isdecimal():
            return int(value)
        raise UsageError(f"--kill={value}: expected none, sigterm, sigkill or a signal number")

    def env_vars(self) -> dict[str, str]:
        pairs = [item for item in self.values.get("env-var", "").split(",") if item]
        return dict(item.partition("=")[::2] for item in pairs)


def _boolean(value: str, name: str) -> bool:
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise UsageError(f"{name}={value}: expected true or false")


def split_profile(argv: list[str]) -> ProfileOptions:
    """`-t x --a=b --flag cmd...` -> recorded option words, the command, and the values by long name."""
    options: list[str] = []
    values: dict[str, str] = {}
    rest = list(argv)
    while rest and rest[0].startswith("-") and rest[0] != "--":
        item = rest.pop(0)
        options.append(item)
        if item.startswith("--"):
            name, has_value, value = item[2:].partition("=")
            if not has_value and name in LONG_WITH_VALUE and rest:
                value = rest.pop(0)
                options.append(value)
            values[name] = value
        elif len(item) == 2:
            if not rest:
                raise UsageError(f"option {item} needs a value")
            value = rest.pop(0)
            options.append(value)
            values[SHORT_NAMES.get(item, item)] = value
    if rest[:1] == ["--"]:
        rest.pop(0)
    return ProfileOptions(options, rest, values)


def expand_output(pattern: str, launched_pid: int) -> str:
    """nsys's output name patterns: %p pid, %h host, %q{VAR} environment, %n first free number, %% a percent."""

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "%%":
            return "%"
        if token == "%p":
            return str(launched_pid)
        if token == "%h":
            return socket.gethostname()
        if token == "%n":
            return "\0n"
        return os.environ.get(match.group(1), "")

    name = re.sub(r"%q\{([^}]*)\}|%[phn%]", replace, pattern)
    if "\0n" in name:
        number = 1
        while any(os.path.exists(name.replace("\0n", str(number)) + s) for s in (".nsys-rep", ".qdstrm")):
            number += 1
        name = name.replace("\0n", str(number))
    return name
