"""nrlprof: step-gated profiling of chosen Ray workers (placeholder during bring-up)."""

from nrlprof.errors import ConfigError

__all__ = ["ConfigError"]
