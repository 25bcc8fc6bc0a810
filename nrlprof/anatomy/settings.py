"""NRL_STEP_ANATOMY and NRL_STEP_ANATOMY_DIR: whether the driver records step anatomy, and where."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from nrlprof.config.variables import ANATOMY_VARIABLE, FALSE_WORDS, TRUE_WORDS
from nrlprof.errors import ConfigError

ANATOMY_DIR_VARIABLE = "NRL_STEP_ANATOMY_DIR"
DEFAULT_DIRECTORY = "step_anatomy"


@dataclass(frozen=True)
class AnatomySettings:
    enabled: bool
    directory: str


def anatomy_settings(environ: Mapping[str, str], backends_configured: bool) -> AnatomySettings:
    """On with NRL_STEP_ANATOMY=1, or when a backend is configured unless NRL_STEP_ANATOMY=0."""
    raw = (environ.get(ANATOMY_VARIABLE) or "").strip()
    word = raw.lower()
    if word in TRUE_WORDS:
        enabled = True
    elif word in FALSE_WORDS:
        enabled = False
    elif not word:
        enabled = backends_configured
    else:
        raise ConfigError(ANATOMY_VARIABLE, raw, "1 or 0 (also true/false, yes/no, on/off)")
    directory = environ.get(ANATOMY_DIR_VARIABLE)
    if directory is None:
        directory = DEFAULT_DIRECTORY
    elif not directory.strip() or "\0" in directory:
        raise ConfigError(ANATOMY_DIR_VARIABLE, directory, "a directory path (default step_anatomy)")
    return AnatomySettings(enabled, os.path.abspath(os.path.expanduser(directory.strip())))
