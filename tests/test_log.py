"""The `nrlprof` logger's own handler writes to stderr as it is when a record comes."""

from __future__ import annotations

import io
import sys

import pytest

from nrlprof.log import configure_logging, logger


def test_a_record_goes_to_the_stderr_of_its_time_not_one_replaced_and_closed_since(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging("INFO")
    first.close()  # as a test runner's capture, or a notebook cell's, is closed once it is done
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    logger.info("step %d", 3)
    assert now.getvalue() == "[nrlprof] INFO step 3\n"
