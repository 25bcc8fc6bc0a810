"""A Python process a matched worker starts (or any Ray worker of an armed job) joins the worker's windows, with no code
of its own: found through NRLPROF_CHANNEL and the start-up shim in `site/`, or a fork handler; its window actions run
on a thread that blocks on the channel. What joins is built by nrlprof.runtime.activation (`activate_child`).
docs/design.md, "Processes a worker starts join its windows"."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING

from nrlprof import wire
from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import MEMORY, NSYS, TORCH, BackendPlan, Plan, Target
from nrlprof.config.variables import CHANNEL_VARIABLE
from nrlprof.launch.runtime_env import parse_worker_descriptor
from nrlprof.log import configure_logging, logger
from nrlprof.process import import_hooks, patches, state
from nrlprof.process.kind import CHILD, disabled, process_kind
from nrlprof.process.lifecycle import CHILDREN, LIFECYCLE
from nrlprof.runtime.children.channel import ENVIRONMENT_PATCH
from nrlprof.runtime.children.names import child_part
from nrlprof.runtime.children.protocol import (
    READ_SIZE,
    Actions,
    ChannelInfo,
    Enable,
    Hello,
    LineReader,
    encode,
    socket_address,
)
from nrlprof.runtime.windows.fanout import Answer
from nrlprof.runtime.windows.profiler import ProcessProfiler
from nrlprof.workers.identity import WorkerIdentity

if TYPE_CHECKING:
    from nrlprof.runtime.children.created_actors import CreatedActorNames
    from nrlprof.runtime.on_demand.workers import EnableInActor
    from nrlprof.runtime.profiled import ProfiledProcess

# Backends a child takes from its worker; rocprof-sys wraps the worker's own interpreter for its lifetime.
CHILD_BACKENDS = (NSYS, TORCH, MEMORY)
CONNECT_TIMEOUT_S = 10.0
FORKSERVER = "forkserver"
_MULTIPROCESSING_HELPERS = (FORKSERVER, "resource_tracker", "semaphore_tracker")
# In the command line of a process `multiprocessing` spawned.
SPAWNED_FLAG = "--multiprocessing-fork"
PREPARE_PATCH = "multiprocessing.spawn.prepare (nrlprof children)"


# --- the child's side ----------------------------------------------------------------------------------------


def channel_info(environ: Mapping[str, str]) -> ChannelInfo | None:
    text = environ.get(CHANNEL_VARIABLE)
    try:
        info = wire.decode(text, ChannelInfo) if text else None
    except ValueError:
        return None
    return info if info is not None and info.address else None


def multiprocessing_helper(orig_argv: list[str]) -> str | None:
    """The helper of `multiprocessing` this process is (`forkserver`, `resource_tracker`), if it is one."""
    for index, argument in enumerate(orig_argv[:-1]):
        if argument == "-c":
            code = orig_argv[index + 1].lstrip()
            return next((h for h in _MULTIPROCESSING_HELPERS if code.startswith(f"from multiprocessing.{h} ")), None)
    return None


# Builds the child's part and connects it to its worker (nrlprof.runtime.activation, the one place that builds it).
Join = Callable[[Mapping[str, str], ChannelInfo], "ProfiledProcess | None"]


def join_worker(environ: Mapping[str, str], forked: bool, join: Join) -> ProfiledProcess | None:
    """Join the windows of the matched worker that started this process (`join`); the child's part, or None.

    A process `multiprocessing` starts (spawned, or forked by the forkserver) joins once it knows its name, when
    `multiprocessing.spawn.prepare` has run. Never raises: a child runs unprofiled rather than not at all.
    """
    info = channel_info(environ)
    if info is None or disabled(environ) or not (forked or process_kind(environ) == CHILD):
        return None
    try:
        install_fork_handler(join)
        argv = list(getattr(sys, "orig_argv", sys.argv))
        helper = multiprocessing_helper(argv)
        if (forked and helper == FORKSERVER) or (not forked and SPAWNED_FLAG in argv):
            import_hooks.when_imported(
                "multiprocessing.spawn", "nrlprof joins once prepared", lambda spawn: _join_once_prepared(spawn, join)
            )
            return None
        if helper is not None:
            return None
        return join(environ, info)
    except Exception as err:
        _warn_not_joining(err)
        return None


def _warn_not_joining(err: Exception) -> None:
    sys.stderr.write(f"[nrlprof] WARNING this process does not join its worker's windows: {err!r}\n")


def _join_once_prepared(spawn: ModuleType, join: Join) -> None:
    def wrap(original):
        def prepare(data, *args, **kwargs):
            original(data, *args, **kwargs)
            patches.uninstall(PREPARE_PATCH)
            info = channel_info(os.environ)
            try:
                if info is not None and state.session is None:
                    join(os.environ, info)
            except Exception as err:
                _warn_not_joining(err)

        return prepare

    patches.install(PREPARE_PATCH, spawn, "prepare", wrap)


def child_targets(targets: Mapping[str, Target], plan: Plan | None = None) -> dict[str, Target]:
    """The worker's gated backends, over whole windows (a child makes no actor calls to capture one by one).

    nsys stays out of children of a worker in discrete mode: a child's range spanning the window would hold its
    worker's per-call captures open; and out of children of a worker launched under nsys for windows asked for
    (NRL_NSYS_PROFILE_STEP_RANGE=on-demand). Where an engine's own torch profiler records a window, the worker sends
    its children none of that window's torch actions (nrlprof.runtime.children.engine_switches).
    """
    nsys_on_demand = plan is not None and plan.on_demand is not None and plan.on_demand.nsys
    kept = {}
    for kind, target in targets.items():
        if kind not in CHILD_BACKENDS or (kind == NSYS and (target.discrete or nsys_on_demand)):
            continue
        kept[kind] = replace(target, discrete=False, methods=())
    return kept


class ParentLink:
    """The child's end of its worker's channel, and the thread that runs the window actions arriving on it."""

    def __init__(self, session: ProfiledProcess, info: ChannelInfo, enable_in_actor: EnableInActor) -> None:
        self.session = session
        self.info = info
        self.enable_in_actor = enable_in_actor
        self.connection: socket.socket | None = None
        self._thread: threading.Thread | None = None
        # Backends of windows asked for, added when this process's backends are built (or at once if they are).
        self.enabled: dict[str, tuple[BackendPlan, Target]] = {}
        self.created_names: CreatedActorNames | None = None

    def connect(self) -> bool:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(CONNECT_TIMEOUT_S)
        try:
            connection.connect(socket_address(self.info.address))
            connection.sendall(encode(Hello(child_part())), socket.MSG_NOSIGNAL)
        except OSError as err:
            connection.close()
            logger.debug("no worker to join at %s: %s", self.info.address, err)
            return False
        connection.settimeout(None)
        self.connection = connection
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="nrlprof-window-actions", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        reader = LineReader()
        connection = self.connection
        while True:
            try:
                data = connection.recv(READ_SIZE)
            except OSError:
                data = b""
            if not data:
                self._worker_gone()
                return
            for message in reader.feed(data):
                if isinstance(message, Enable):
                    self._enable(message)
                    continue
                if not isinstance(message, Actions):
                    continue
                reply = self._apply(message)
                try:
                    connection.sendall(encode(reply), socket.MSG_NOSIGNAL)
                except OSError:
                    self._worker_gone()
                    return

    def _enable(self, asked: Enable) -> None:
        """A backend of a window asked for, added before the window's first action arrives."""
        session = self.session
        try:
            plan = Plan.from_json(asked.plan)
            descriptor = parse_worker_descriptor(asked.worker)
            worker, kind = descriptor.identity, asked.kind
            target = child_targets(descriptor.targets).get(kind)
            backend_plan = plan.backend(kind)
            if target is None or backend_plan is None:
                return
            if session.identity is None:
                configure_logging(plan.log_level)
                session.follow_worker(plan, worker)
            self.info.session_dir = self.info.session_dir or asked.session_dir
            self.info.node_ip = self.info.node_ip or asked.node_ip
            self.enabled[kind] = (backend_plan, target)
            if session.has_process:
                session.process.add_backend(kind, backend_plan, target)
        except Exception as err:  # the child's own work goes on whatever happens here
            logger.error("a window asked for cannot reach this process (pid %d): %s", os.getpid(), err)
            return
        self._enable_created_actors(asked.plan, kind, worker, target)

    def _enable_created_actors(self, plan_json: str, kind: str, worker: WorkerIdentity, target: Target) -> None:
        from nrlprof.runtime.children.created_actors import CreatedActorNames, enable_created_actors

        if self.created_names is None:
            self.created_names = CreatedActorNames()
        try:
            enable_created_actors(
                self.session, self.created_names, plan_json, kind, worker, target, self.enable_in_actor
            )
        except Exception as err:  # the child's own work goes on whatever happens here
            logger.error("a window asked for cannot reach the actors this process created: %s", err)

    def _apply(self, message: Actions) -> Answer:
        """The actions of one message, here and in the actors this process created; the answer to send back."""
        session = self.session
        if session.identity is None:  # its worker was never selected by a window asked for
            return Answer()
        try:
            process = self.process()
            actions = message.actions
            process.deadline = message.deadline or None
            try:
                applied = process.apply(actions)
            finally:
                process.deadline = None
            records = applied.records
            if len(session.tracker):
                records = records + session.channel.send(actions)
            return Answer(process.open_kinds(), tuple(records), tuple(applied.unwritten), process.role.worker_name)
        except Exception as err:  # the child's own work goes on whatever happens here
            logger.error("window actions failed in this process (pid %d): %s", os.getpid(), err)
        return Answer(name=session.process.role.worker_name if session.has_process else "")

    def process(self) -> ProcessProfiler:
        """This process's backends, named at the first window action (a `multiprocessing` name is set by then)."""
        session = self.session
        if session.has_process:
            return session.process
        worker = session.identity
        part = child_part()
        identity = WorkerIdentity(part, None, worker.rank, f"{worker.name}.{part}")
        role = ProcessRole(identity, session.plan, self.info.session_dir, self.info.node_ip, worker)
        process = ProcessProfiler(role, session.targets, session.windows)
        for kind, (backend_plan, target) in self.enabled.items():
            process.add_backend(kind, backend_plan, target)
        session.use_process(process)
        return process

    def _worker_gone(self) -> None:
        """The worker closed the channel or is gone: close open windows (their files are kept) and stop."""
        if self.session.has_process:
            try:
                self.session.process.close_all()
            except Exception as err:
                logger.error("closing the windows of this process (pid %d) failed: %s", os.getpid(), err)

    def close(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            self.connection.close()

    def close_inherited(self) -> None:
        """In a process forked from this one: drop the copy of the connection (the parent keeps its own)."""
        if self.connection is not None:
            self.connection.close()


# --- fork ----------------------------------------------------------------------------------------------------


def install_fork_handler(join: Join) -> None:
    """Processes forked from here join too (nrlprof.process.lifecycle runs the handler in them)."""
    LIFECYCLE.on_fork(CHILDREN, lambda: _after_fork_in_child(join))


def _after_fork_in_child(join: Join) -> None:
    try:
        inherited, state.session = state.session, None
        if inherited is not None:
            for end in (inherited.children, inherited.parent_link):
                if end is not None:
                    end.close_inherited()
        patches.uninstall_all(keep=(ENVIRONMENT_PATCH, PREPARE_PATCH))
        import_hooks.remove_all()
        join_worker(os.environ, True, join)
    except Exception as err:
        sys.stderr.write(f"[nrlprof] WARNING this forked process does not join its worker's windows: {err!r}\n")
