"""The options an installed nsys knows, read from `nsys profile --help`, and the plan's nsys options it does not.

nsys lists each option of `nsys profile` on a line of its own, indented: `-t, --trace=` or `--capture-range-end=`
(other versions print `-t [ --trace ] arg` or `--trace arg`), its description on the lines below. An option the
installed nsys does not know makes it refuse to launch the worker, so `plan` and `doctor` check the plan's
options (the nsys backend's and the controller's) against that list where nsys is present.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from dataclasses import dataclass

from nrlprof.config.plan import NSYS, Plan
from nrlprof.errors import ConfigError

HELP_TIMEOUT_S = 30.0
MIN_OPTIONS = 10  # fewer declarations than this: not nsys's help
_DECLARATION = re.compile(
    r"^[ \t]+(?:-(?P<short>[A-Za-z0-9])(?:,[ \t]*|[ \t]*\[[ \t]*))?--(?P<long>[A-Za-z0-9][A-Za-z0-9-]*)(?=[=\s\]]|$)"
)
EXPECTED = "an option that `nsys profile --help` of the installed nsys lists"


@dataclass(frozen=True)
class NsysOptions:
    """The long and short option names of `nsys profile`, without dashes."""

    long: frozenset[str]
    short: frozenset[str]

    def knows(self, name: str) -> bool:
        return name in self.short if len(name) == 1 else name in self.long

    def closest(self, name: str) -> str | None:
        return next(iter(difflib.get_close_matches(name, self.long, n=1, cutoff=0.6)), None)


def parse_profile_help(text: str) -> NsysOptions | None:
    """The options `nsys profile --help` declares; None when the text is not such a help."""
    long: set[str] = set()
    short: set[str] = set()
    for line in text.splitlines():
        match = _DECLARATION.match(line)
        if match:
            long.add(match["long"])
            if match["short"]:
                short.add(match["short"])
    if len(long) < MIN_OPTIONS or "output" not in long:
        return None
    return NsysOptions(frozenset(long), frozenset(short))


def read_profile_help(nsys: str, timeout_s: float = HELP_TIMEOUT_S) -> tuple[NsysOptions | None, str]:
    """The options the nsys at `nsys` knows, or None and why they could not be read."""
    try:
        done = subprocess.run([nsys, "profile", "--help"], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"`{nsys} profile --help` did not finish within {timeout_s:.0f}s"
    except OSError as err:
        return None, f"`{nsys} profile --help` could not run: {err.strerror or err}"
    known = parse_profile_help(done.stdout + "\n" + done.stderr)
    if known is None:
        return None, f"`{nsys} profile --help` printed no option list nrlprof can read"
    return known, ""


def plan_nsys_options(plan: Plan) -> list[tuple[str, str]]:
    """(option name, where it comes from) of every nsys option the plan passes: the backend's options and flags,
    and the controller's (verl's controller_nsight_options)."""
    found = []
    backend = plan.backend(NSYS)
    if backend is not None:
        found += [(name, "nsys options (NRL_NSYS_EXTRA_OPTIONS or the config file)") for name, _ in backend.options]
        found += [(name, "nsys flags (the config file)") for name in backend.flags]
    found += [(name, "controller nsys options (controller_nsight_options)") for name, _ in plan.controller_nsys]
    return found


def check_nsys_options(plan: Plan, known: NsysOptions, nsys: str, version: str | None = None) -> None:
    """ConfigError naming the first option of the plan that `known` lacks."""
    for name, where in plan_nsys_options(plan):
        if known.knows(name):
            continue
        dashes = "-" if len(name) == 1 else "--"
        closest = None if len(name) == 1 else known.closest(name)
        hint = f"; did you mean '--{closest}'?" if closest else ""
        installed = f"{nsys}" + (f", version {version}" if version else "")
        raise ConfigError(
            where,
            dashes + name,
            EXPECTED,
            f"the installed nsys ({installed}) does not know it and would not launch the worker{hint}",
        )


def unknown_nsys_options(plan: Plan, known: NsysOptions) -> list[str]:
    """The plan's nsys options (with their dashes) that `known` lacks."""
    return [("-" if len(name) == 1 else "--") + name for name, _ in plan_nsys_options(plan) if not known.knows(name)]
