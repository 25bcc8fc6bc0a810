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
    OK: "done: everything asked for was done",
    PARTIAL: (
        "done in part: an input skipped or unreadable (or every one), nothing found to take, a node or file that "
        "failed, or a check that found a problem (doctor: an error on a node; patch-ray --check: a plugin file not "
        "fixed on disk; plan: a misspelled NRL_* variable; capture: a worker late or gone in the window)"
    ),
    BAD_INPUT: (
        "nothing done: bad input (a missing input, a bad option or setting, an nsys option the installed nsys does "
        "not know, no cluster at --address, an output path that cannot be written; capture: no armed job, or a "
        "request the job refused: a pattern no live worker matches, a window of the same backend that overlaps)"
    ),
    INTERRUPTED: "interrupted",
}


def outcome(complete: bool) -> int:
    """OK when everything was done, else PARTIAL."""
    return OK if complete else PARTIAL
