"""The process's one lifecycle: one exit hook and one fork hook, and the order its closers and fork handlers run in,
written here (docs/design.md, "Process-wide state"). The exit hook is registered again whenever a closer is added, so
it runs before Ray's own shutdown hook. `uninstall` takes back what nrlprof put in place."""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable

from nrlprof.log import logger
from nrlprof.process import import_hooks, patches

LISTENER, GATE, ANSWERS, CONTROLLER_ACTORS, FINISHER, ANATOMY = (
    "listener", "gate", "answers", "controller actors", "finisher", "anatomy"
)  # fmt: skip
CLOSING_ORDER = (LISTENER, GATE, ANSWERS, CONTROLLER_ACTORS, FINISHER, ANATOMY)
CHILDREN = "children"
FORK_ORDER = (FINISHER, CHILDREN)

Closer = Callable[[], object]


class Lifecycle:
    def __init__(self) -> None:
        self._closers: dict[str, Closer] = {}
        self._fork_handlers: dict[str, Callable[[], None]] = {}
        self._exit_hook = False
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def add(self, name: str, closer: Closer) -> None:
        """`closer` runs at exit in its place of CLOSING_ORDER (in place of the one of that name so far)."""
        if name not in CLOSING_ORDER:
            raise ValueError(f"{name!r} has no place in the closing order {CLOSING_ORDER}")
        self._closers[name] = closer
        self.after_ray_init()

    def discard(self, *names: str) -> None:
        for name in names:
            self._closers.pop(name, None)

    def after_ray_init(self) -> None:
        """The exit hook, registered after everything registered so far (Ray's shutdown hook among them)."""
        if self._exit_hook:
            atexit.unregister(self._at_exit)
        atexit.register(self._at_exit)
        self._exit_hook = True

    def close(self, skip: tuple[str, ...] = ()) -> None:
        """Run the closers in their order (each once, whatever the others do)."""
        for name in CLOSING_ORDER:
            closer = self._closers.get(name)
            if closer is None or name in skip:
                continue
            try:
                closer()
            except Exception as err:  # the rest still close
                logger.error("closing nrlprof's %s failed: %s", name, err)

    def _at_exit(self) -> None:
        self.close()

    def on_fork(self, name: str, handler: Callable[[], None]) -> None:
        """`handler` runs in a forked child, in its place of FORK_ORDER."""
        if name not in FORK_ORDER:
            raise ValueError(f"{name!r} has no place in the fork order {FORK_ORDER}")
        self._fork_handlers[name] = handler

    def off_fork(self, name: str) -> None:
        self._fork_handlers.pop(name, None)

    def _after_fork_in_child(self) -> None:
        self._closers.clear()  # the parent's: its gate, listener and anatomy are not the child's
        for name in FORK_ORDER:
            handler = self._fork_handlers.get(name)
            if handler is not None:
                handler()

    def uninstall(self) -> None:
        """Take back what nrlprof put in place: its closers and the fork handlers but the finisher's (the process's
        own: the files it finishes are written, whatever is activated), every patch and import hook."""
        self.discard(*(name for name in CLOSING_ORDER if name != FINISHER))
        self.off_fork(CHILDREN)
        patches.uninstall_all()
        import_hooks.remove_all()


# The process's one lifecycle.
LIFECYCLE = Lifecycle()
