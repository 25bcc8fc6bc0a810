"""The exit status of every `nrlprof` command, decided once: the CLI and each command return these.

`nrlprof patch-ray` keeps the same meanings in constants of its own (it runs on the standard library alone,
without nrlprof installed); a test holds the two equal.
"""

from __future__ import annotations

OK = 0
PARTIAL = 1
BAD_INPUT = 2
INTERRUPTED = 130

MEANINGS = {
    OK: "done",
    PARTIAL: "done in part: an input skipped (or every one), a node that failed, a check that found a problem",
    BAD_INPUT: "nothing done: a missing input, a bad option, an output path that cannot be written",
    INTERRUPTED: "interrupted",
}


def outcome(complete: bool) -> int:
    """OK when everything was done, else PARTIAL."""
    return OK if complete else PARTIAL
