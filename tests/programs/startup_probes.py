"""What a fresh interpreter holds before a program's own code runs, the start-up hook (nrlprof-startup.pth) having
run or not: `python startup_probes.py <probe>`. It imports nothing at its top but `sys`, so that what it finds
imported the hook imported."""

from __future__ import annotations

import sys


def imported() -> None:
    """The modules of nrlprof, Ray and torch imported."""
    print(sorted(m for m in sys.modules if m.startswith(("nrlprof", "ray", "torch"))))


def hook_woken() -> None:
    print("nrlprof_startup" in sys.modules)


def active_before_own_code() -> None:
    """Whether nrlprof is active, and Ray and torch imported."""
    nrlprof = sys.modules.get("nrlprof")
    print(nrlprof is not None and nrlprof.is_active(), "ray" in sys.modules, "torch" in sys.modules)


def active() -> None:
    nrlprof = sys.modules.get("nrlprof")
    print(nrlprof is not None and nrlprof.is_active())


def active_from() -> None:
    """Whether nrlprof is active, and the file it was imported from."""
    nrlprof = sys.modules.get("nrlprof")
    print(nrlprof is not None and nrlprof.is_active(), nrlprof and nrlprof.__file__)


def ran() -> None:
    print("the program ran")


def configured_later() -> None:
    """The session the hook made, then `import nrlprof` and `configure` with verl's config: the same session."""
    from nrlprof.process import state

    first = state.session
    import nrlprof

    nrlprof.configure({"trainer": {"profile_steps": [5]},
                       "actor_rollout_ref": {"actor": {"profiler": {"enable": True, "all_ranks": True,
                                                                    "tool": "torch"}}},
                       "global_profiler": {"tool": "torch"}})  # fmt: skip
    print(first is not None, state.session is first, [b.kind for b in state.session.plan.backends])


def children() -> None:
    """Whether a child of this process (`python startup_probes.py active`) is active: the child of a driver, then
    of a process that marked its children as a controller or matched worker does."""
    import subprocess

    import ray  # noqa: F401  # a driver's: Ray imported

    child = [sys.executable, __file__, "active"]
    print("driver's: child", subprocess.run(child, capture_output=True, text=True).stdout.strip())
    from nrlprof.runtime.activation import mark_children

    mark_children()  # what a controller or matched worker does when it activates
    print("ray worker's: child", subprocess.run(child, capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    globals()[sys.argv[1]]()
