"""Headless Chromium for the tests that check how a report is laid out on screen."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
REQUIRE_BROWSER = "NRLPROF_REQUIRE_BROWSER"  # set to 1 where a missing browser must fail the run, not skip it


def chromium() -> str:
    """A headless-capable Chromium on PATH; skipped without one unless NRLPROF_REQUIRE_BROWSER=1."""
    found = next(filter(None, map(shutil.which, BROWSERS)), None)
    if found is None:
        message = f"no Chromium on PATH ({', '.join(BROWSERS)}; apt-get install -y chromium)"
        if os.environ.get(REQUIRE_BROWSER) == "1":
            pytest.fail(f"{message} and {REQUIRE_BROWSER}=1")
        pytest.skip(message)
    return found


def headless(
    browser: str, page: Path, profile: Path, window_size: str, *action: str, text: bool = False
) -> subprocess.CompletedProcess:
    """`page` opened in headless `browser` with a fresh profile, no network and no GPU, in a window of
    `window_size` ("WIDTH,HEIGHT"); `action` is what it does with the page: `--screenshot=PATH` or `--dump-dom`."""
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", f"--window-size={window_size}", *action, f"file://{page}"]  # fmt: skip
    return subprocess.run(command, check=True, capture_output=True, text=text, timeout=300)
