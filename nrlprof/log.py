"""The `nrlprof` logger: INFO visible by default, set up only when nrlprof activates."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

logger = logging.getLogger("nrlprof")
_HANDLER_NAME = "nrlprof-stderr"


def configure_logging(level: str) -> None:
    """Attach one stderr handler and stop propagation to the root logger, so no record prints twice.

    Handlers a host application attaches to the `nrlprof` logger itself still see every record.
    """
    logger.setLevel(level)
    if any(h.get_name() == _HANDLER_NAME for h in logger.handlers):
        return
    handler = _StderrNow()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("[nrlprof] %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False


class _StderrNow(logging.StreamHandler):
    """Writes to `sys.stderr` as it is when a record comes: a host that replaces it later (Jupyter, a test runner,
    a log redirection) gets the records, not a stream it closed."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _stream: object) -> None:
        pass
