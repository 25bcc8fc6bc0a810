"""The `nrlprof` logger: INFO visible by default, set up only when nrlprof activates."""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("nrlprof")
_HANDLER_NAME = "nrlprof-stderr"


def configure_logging(level: str) -> None:
    """Attach one stderr handler and stop propagation to the root logger, so no record prints twice.

    Handlers a host application attaches to the `nrlprof` logger itself still see every record.
    """
    logger.setLevel(level)
    if any(h.get_name() == _HANDLER_NAME for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("[nrlprof] %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
