"""What `import nrlprof` does in a fresh interpreter: `python import_probes.py <probe>`. It imports nothing at its top
but `sys`, so that what a probe finds imported `import nrlprof` (or the start-up hook) imported."""

from __future__ import annotations

import sys


def inert() -> None:
    """Ray, torch and nvtx imported, the patches installed, whether active, and the handlers of nrlprof's logger."""
    import logging

    import nrlprof
    import nrlprof.process.patches as patches

    imported = sorted(m for m in ("ray", "torch", "nvtx") if m in sys.modules)
    print(imported, patches.installed(), nrlprof.is_active(), logging.getLogger("nrlprof").handlers)


def loaded() -> None:
    """The modules `import nrlprof` loads."""
    before = set(sys.modules)
    import nrlprof  # noqa: F401

    print(*sorted(set(sys.modules) - before))


def hooks_wait_for_ray() -> None:
    """The patches installed and whether active and Ray imported after `import nrlprof`; the patches after
    `import ray`."""
    import nrlprof
    import nrlprof.process.patches as patches

    print(patches.installed(), nrlprof.is_active(), "ray" in sys.modules, flush=True)
    import ray  # noqa: F401

    print(patches.installed())


if __name__ == "__main__":
    globals()[sys.argv[1]]()
