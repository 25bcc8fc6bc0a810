"""The armed job's controller listens for windows asked for, on threads of its own: requests read from Ray's KV store,
checked, their workers readied, the window handed to the gate; the job's card rewritten every HEARTBEAT_S; every
change answered. Nothing here raises into the job. docs/design.md, "Windows asked for while the job runs"."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nrlprof import rayapi, wire
from nrlprof.config.plan import MEMORY, NSYS, TORCH, BackendPlan
from nrlprof.config.requests import (
    ACCEPTED,
    HEARTBEAT_S,
    POLL_S,
    REFUSED,
    Card,
    Reply,
    Request,
    SlowBudget,
    answer_key,
    armed_key,
    request_prefix,
)
from nrlprof.config.slow import KEEP
from nrlprof.config.steps import Window
from nrlprof.launch.runtime_env import worker_descriptor
from nrlprof.log import logger
from nrlprof.process import lifecycle
from nrlprof.process.lifecycle import LIFECYCLE
from nrlprof.runtime.on_demand.workers import describe_names, live_workers, names_and_ranks, ready_in_actors, selected
from nrlprof.runtime.windows.asked import AskedWindow, asked_conflict
from nrlprof.workers.matching import match_backend
from nrlprof.workers.tracker import TrackedActor

if TYPE_CHECKING:
    from nrlprof.runtime.controller import Controller
    from nrlprof.runtime.on_demand.workers import EnableInActor

# How long a request waits for the workers the controller has called but not yet heard from.
ADOPTION_WAIT_S = 2.0


def start_listening(session: Controller, enable_in_actor: EnableInActor) -> Listener:
    import ray

    context = ray.get_runtime_context()
    listener = Listener(session, context.get_job_id(), _controller_name(context), enable_in_actor)
    listener.start()
    LIFECYCLE.add(lifecycle.LISTENER, listener.stop_taking)
    LIFECYCLE.add(lifecycle.ANSWERS, listener.stop)
    if session.plan.on_demand is not None:
        logger.info(
            "job %s is armed: windows asked for with `nrlprof capture` open at the next step (controller %s on %s pid "
            "%d)",
            listener.job,
            listener.controller,
            listener.host,
            listener.pid,
        )
    return listener


def _controller_name(context: Any) -> str:
    try:
        return context.get_actor_name() or f"actor {context.get_actor_id()}" if context.get_actor_id() else "driver"
    except Exception:
        return "driver"


class Listener:
    def __init__(self, session: Controller, job: str, controller: str, enable_in_actor: EnableInActor) -> None:
        self.session = session
        # Readies a worker for the window asked for, run inside it (nrlprof.runtime.activation.enable_in_actor).
        self.enable_in_actor = enable_in_actor
        self.job = job
        self.controller = controller
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.asked: list[AskedWindow] = []
        self._written: dict[str, str] = {}
        self._stop = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="nrlprof-on-demand", daemon=True)
        self._card_thread = threading.Thread(target=self._keep_card, name="nrlprof-on-demand-card", daemon=True)

    def start(self) -> None:
        """The card is written before this returns, so the job is armed once it says so (`nrlprof capture` right
        after the log line finds it); then rewritten every HEARTBEAT_S."""
        self._write_card()
        self._card_thread.start()
        self._thread.start()

    def stop_taking(self) -> None:
        """No more requests: the threads end (the card stays until `stop`)."""
        self._stop.set()
        for thread in (self._thread, self._card_thread):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout=5)

    def stop(self) -> None:
        """The job ends: what changed is answered (the windows the gate closed), and the job's card goes."""
        if self._stopped:
            return
        self._stopped = True
        self.stop_taking()
        if rayapi.connected():
            try:
                self._answer_changes()
                rayapi.kv_delete(armed_key(self.job))
            except Exception as err:
                logger.debug("could not take the armed job's card down: %s", err)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not rayapi.connected():
                return
            try:
                self.tick()
            except Exception as err:  # the job runs on; the next tick tries again
                logger.warning("nrlprof's listener for windows asked for: %s", err)
            self._stop.wait(POLL_S)

    def _keep_card(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            if not rayapi.connected():
                return
            self._write_card()

    def _write_card(self) -> None:
        try:
            rayapi.kv_put(armed_key(self.job), self.card())
        except Exception as err:  # the next beat tries again; a card older than STALE_S reads as a job gone
            logger.debug("could not write the armed job's card: %s", err)

    def tick(self) -> None:
        self.session.adoption.take_answers()  # workers another actor created, that the controller called
        gate = self.session.built_gate()
        if gate is not None:
            for key in rayapi.kv_keys(request_prefix(self.job)):
                text = rayapi.kv_get(key)
                rayapi.kv_delete(key)
                if text:
                    self.take(key.decode(errors="replace"), text, gate)
        self._answer_changes()

    def card(self) -> str:
        gate = self.session.built_gate()
        workers = names_and_ranks(live_workers(self.session))
        step = None if gate is None else gate.last_step
        asks = self.session.plan.on_demand is not None
        card = Card(
            self.job, self.controller, self.host, self.pid, step, workers, time.time(), asks, self.slow_budget()
        )
        return wire.encode(card)

    def slow_budget(self) -> SlowBudget | None:
        plan = self.session.plan
        if plan.slow is None:
            return None
        gate = self.session.built_gate()
        watch = gate.slow if gate is not None else None
        backends = tuple(f"{b.kind} {'slow:keep' if b.slow == KEEP else 'slow'}" for b in plan.backends if b.slow)
        used, steps = (watch.used, tuple(t.step for t in watch.triggers)) if watch is not None else (0, ())
        return SlowBudget(backends, plan.slow.factor, used, plan.slow.max_triggers, steps)

    def take(self, key: str, text: bytes, gate: Any) -> None:
        try:
            request = Request.from_json(text)
        except ValueError as err:
            request_id = key.rsplit("/", 1)[-1]
            logger.warning("request %s for this job could not be read (%s): refused, nothing done", request_id, err)
            self._write(request_id, Reply(REFUSED, f"the request could not be read: {err}"))
            return
        logger.info("request %s from node %s: %s", request.id, request.node or "?", request.describe())
        try:
            refusal = self.refusal(request, gate) or self.accept(request, gate)
        except Exception as err:
            refusal = f"it failed in the job's controller: {err}"
        if refusal:
            logger.info("request %s refused, nothing done: %s", request.id, refusal)
            self._write(request.id, Reply(REFUSED, refusal, **self._about()))

    def refusal(self, request: Request, gate: Any) -> str | None:
        """Why the request cannot be taken; None when it can."""
        if request.job != self.job:
            return f"it is for job {request.job}, and reached job {self.job}"
        plan = self.session.plan
        if plan.on_demand is None:
            return ("this job is armed for slow steps only: it opens no window asked for (NRL_PROFILE_ON_DEMAND=1 at "
                    "its start arms it for them)")  # fmt: skip
        keeping = plan.backend(request.backend)
        if keeping is not None and keeping.slow == KEEP:
            return f"this job records every step with {request.backend} for slow:keep; ask for another backend"
        if request.backend == NSYS and not self.session.plan.on_demand.nsys:
            return (
                "nsys cannot attach to a running process: a worker profiled by nsys on demand is launched under nsys. "
                f"Arm its workers at the job's start with NRL_NSYS_WORKER_PATTERNS='{','.join(request.patterns)}' and "
                "NRL_NSYS_PROFILE_STEP_RANGE=on-demand"
            )
        for asked in self.asked:
            if asked.kind == request.backend and not asked.finished:
                steps = f" (steps {asked.window.label})" if asked.window else ""
                return f"request {asked.request.id} for {asked.kind}{steps} overlaps it; ask again once it has closed"
        if any(asked.kind == request.backend for asked in gate.asked_waiting):
            return f"another {request.backend} request waits for the next step; ask again once it has closed"
        last = gate.last_step or 0
        return asked_conflict(gate.gated, gate.open, request.backend, Window(last + 1, last + request.steps))

    def accept(self, request: Request, gate: Any) -> str | None:
        """Ready the selected workers (their backend in place), then hand the window to the gate."""
        backend_plan = self.backend_plan(request)
        # A worker first called just now may not have said who it is yet (its answer comes in order with the call).
        self.session.adoption.take_answers(wait_s=ADOPTION_WAIT_S)
        workers = live_workers(self.session)
        chosen = selected(workers, backend_plan)
        if chosen and request.backend == NSYS:
            launched = self.session.plan.backend(NSYS)
            outside = [(h, m) for h, m in chosen if match_backend(launched, self.session.identity_of(h)) is None]
            if outside:
                names = describe_names(names_and_ranks([(h, self.session.identity_of(h)) for h, m in outside]))
                patterns = ",".join(t.pattern for t in launched.targets)
                return (
                    f"{names} did not start under nsys (nsys cannot attach to a running process): the workers launched "
                    f"under nsys are those of NRL_NSYS_WORKER_PATTERNS='{patterns}' with "
                    "NRL_NSYS_PROFILE_STEP_RANGE=on-demand at the job's start"
                )
        if not chosen:
            return (
                f"no live worker matches --workers '{','.join(request.patterns)}'"
                + ("" if request.ranks is None else f" --ranks {','.join(map(str, sorted(request.ranks)))}")
                + f"; the workers there are: {describe_names(names_and_ranks(workers))}"
            )
        ready, problems = self._ready(chosen, backend_plan)
        if not ready:
            said = "; ".join(problems) if problems else "busy or gone"
            return f"none of the selected workers is ready ({said}); nothing done"
        if request.backend == TORCH:  # the controller's profiler too, here rather than in the window's first step
            from nrlprof.backends.torch_profiler import start_up_profiler

            try:
                start_up_profiler("the controller")
            except Exception as err:  # the window starts it then, as a planned window without warm-up does
                logger.debug("the controller's torch profiler did not start up ahead of the window: %s", err)
        asked = AskedWindow(request, backend_plan, ready)
        self.asked.append(asked)
        gate.asked_waiting.append(asked)
        gone = len(chosen) - len(ready)
        logger.info(
            "request %s accepted: %s window in %d worker(s) (%s)%s and the controller, from the next step",
            request.id,
            request.backend,
            len(ready),
            describe_names(names_and_ranks([(a.handle, a.identity) for a in ready])),
            f"; {gone} selected worker(s) did not answer" if gone else "",
        )
        return None

    def backend_plan(self, request: Request) -> BackendPlan:
        on_demand = self.session.plan.on_demand
        if request.backend == NSYS:
            return replace(self.session.plan.backend(NSYS), targets=request.targets)
        if request.backend == MEMORY:
            return BackendPlan(MEMORY, request.targets, None, options=on_demand.memory_options,
                               output_dir=on_demand.memory_dir)  # fmt: skip
        return BackendPlan(TORCH, request.targets, None)

    def _ready(self, chosen: list, backend_plan: BackendPlan) -> tuple[list[TrackedActor], list[str]]:
        """The selected workers with their backend in place, and what each of the others said."""
        plan_json = replace(self.session.plan, backends=(backend_plan,)).to_json()
        calls = [(handle, identity, worker_descriptor(identity, (match,)), match.matched_name)
                 for handle, match in chosen if (identity := self.session.identity_of(handle)) is not None]  # fmt: skip
        ready, problems = ready_in_actors(calls, plan_json, backend_plan.kind, self.session.plan.timeout_s,
                                          self.enable_in_actor)  # fmt: skip
        return [TrackedActor(handle, identity, (backend_plan.kind,)) for handle, identity in ready], problems

    def _about(self) -> dict:
        return {"job": self.job, "controller": self.controller, "host": self.host, "pid": self.pid}

    def _answer_changes(self) -> None:
        for asked in list(self.asked):
            if self._written.get(asked.request.id) == asked.state:
                continue
            self._written[asked.request.id] = asked.state
            window = asked.window
            workers = names_and_ranks([(a.handle, a.identity) for a in asked.actors])
            span = {} if window is None else {"window": window.label, "first": window.first, "last": window.last}
            self._write(asked.request.id, Reply(asked.state, asked.message, **self._about(), backend=asked.kind,
                                                workers=workers, answered=asked.answered,
                                                records=tuple(asked.records), **span))  # fmt: skip
            if asked.state != ACCEPTED:
                logger.info("request %s: %s%s", asked.request.id, asked.state,
                            f" (steps {window.label})" if window else f": {asked.message}")  # fmt: skip
            if asked.finished:
                self.asked.remove(asked)

    def _write(self, request_id: str, reply: Reply) -> None:
        rayapi.kv_put(answer_key(request_id), reply.to_json())
