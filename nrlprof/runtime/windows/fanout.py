"""One fan-out of window actions from a process to its peers, whatever carries them: the actors it tracks (over Ray,
nrlprof.runtime.windows.dispatch) or the processes a worker started (nrlprof.runtime.children.channel). It owns the
deadline, the late peers, each peer's open and finishing windows as its answers say them, and the records of a peer
found gone (`died`, `exited`); the transport only sends and waits. ARCHITECTURE.md, "The capture side's objects"."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from nrlprof.backends import backend_class
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.runtime.windows.profiler import SETTLE, START, STEP, STOP, Action


@dataclass(frozen=True)
class Answer:
    """What a process answers a batch of actions with: the backends it has a window open in; the records of the
    windows that closed (completed where the batch settled them); and, from a worker's child, those its worker
    completes and writes (nsys: the report is the worker's). `name`: a child's own name for itself."""

    open: tuple[str, ...] = ()
    records: tuple[WindowRecord, ...] = ()
    unwritten: tuple[WindowRecord, ...] = ()
    name: str = ""


@dataclass
class OpenWindow:
    """A window as the actions sent opened it: its label, the steps sent, when it began."""

    window: str
    steps: list[int]
    started_at: float


@dataclass(eq=False)
class Peer:
    """One process the actions reach, as the fan-out knows it. `kinds`: the backends it takes part in (None: any)."""

    link: Any
    kinds: frozenset[str] | None = None
    late: bool = False
    # Backends with a window open, and those stopped whose files it may still be finishing, as its answers say.
    windows: set[str] = field(default_factory=set)
    finishing: set[str] = field(default_factory=set)
    # The batches sent and not answered yet, oldest first.
    owed: list[tuple[Action, ...]] = field(default_factory=list)

    def takes(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds

    def sent_windows(self) -> set[str]:
        """Its windows as the actions sent to it leave them (its answers say it for sure)."""
        kinds = set(self.windows)
        for batch in self.owed:
            for action in batch:
                if action.op == START and self.takes(action.kind):
                    kinds.add(action.kind)
                elif action.op == STOP:
                    kinds.discard(action.kind)
        return kinds


@dataclass(frozen=True)
class Gone:
    """A peer found gone: why, as far as its transport can say."""

    cause: Any = None


# What a transport's `send` returns for a peer that could not take the actions by the deadline (it fell behind).
BEHIND = object()


class Transport(Protocol):
    """How actions reach one kind of peer. `send` returns what `wait` waits on; Gone; BEHIND; or None (not sent, and
    it said why). `wait` gives each answer that came (an Answer, or Gone) by the deadline, by token: all those
    `wanted`, as far as they came in time, and those of the other tokens already in."""

    def peers(self) -> Sequence[Peer]: ...

    def describe(self, peer: Peer) -> str: ...

    def send(self, peer: Peer, actions: tuple[Action, ...], deadline: float) -> object | Gone | None: ...

    def wait(self, tokens: dict[object, Peer], wanted: set[object], deadline: float) -> dict[object, Answer | Gone]: ...

    def forget(self, peer: Peer) -> None: ...

    def gone_records(self, peer: Peer, gone: Gone, during: dict[str, OpenWindow], after: dict[str, OpenWindow],
                     found_at: int | None) -> list[WindowRecord]: ...  # fmt: skip


@dataclass
class Posting:
    """Actions sent, not yet waited for: the answers awaited, when waiting ends, the records already in, and those
    the peers left to this process to complete and write (`Answer.unwritten`)."""

    actions: tuple[Action, ...]
    deadline: float
    waiting: set[object] = field(default_factory=set)
    records: list[WindowRecord] = field(default_factory=list)
    unwritten: list[WindowRecord] = field(default_factory=list)


class Fanout:
    def __init__(
        self, transport: Transport, timeout_s: float, write: Callable[[WindowRecord], None] | None = None
    ) -> None:
        self.transport = transport
        self.timeout_s = timeout_s
        # Writes a record in this process's manifest: that of a peer found gone.
        self.write = write
        self.outstanding: dict[object, Peer] = {}
        # The windows the actions sent so far opened, per backend, and those stopped whose files are being finished.
        self.windows: dict[str, OpenWindow] = {}
        self.finishing: dict[str, OpenWindow] = {}
        self.starting: dict[str, OpenWindow] = {}
        self.found_at: int | None = None
        self.answered = 0

    def send(self, actions: tuple[Action, ...]) -> list[WindowRecord]:
        return self.collect(self.post(actions))

    def post(self, actions: tuple[Action, ...], only: Sequence[Peer] | None = None) -> Posting:
        """Send the actions to every peer now (or to `only`); `collect` waits for the answers."""
        posting = Posting(actions, time.monotonic() + self.timeout_s)
        posting.records = self._take(self._answers_in(), posting.unwritten)
        self.found_at = max((a.step for a in actions if a.op in (START, STEP)), default=None)
        self.starting = {a.kind: OpenWindow(a.window.label, [], time.time()) for a in actions if a.op == START}
        peers = self.transport.peers() if only is None else only
        if any(a.op == START for a in actions):  # a new window: only peers still busy with earlier actions stay late
            for peer in peers:
                peer.late = bool(peer.owed)
        flagged = tuple(replace(a, late=True) for a in actions)
        for peer in peers:
            sent = actions if not peer.late else flagged
            token = self.transport.send(peer, sent, posting.deadline)
            if isinstance(token, Gone):
                posting.records += self.gone(peer, token)
            elif token is BEHIND:
                self._fell_behind(peer, actions)
            elif token is not None:
                peer.owed.append(actions)
                self.outstanding[token] = peer
                if not peer.late:
                    posting.waiting.add(token)
        self.answered = 0
        return posting

    def collect(self, posting: Posting) -> list[WindowRecord]:
        """Wait for the answers `post` asked for (until its deadline); the records that came, with those of late
        peers that came meanwhile and of peers found gone."""
        records = posting.records
        if posting.waiting:
            answers = self.transport.wait(self.outstanding, posting.waiting, posting.deadline)
            self.answered = sum(1 for token in posting.waiting if isinstance(answers.get(token), Answer))
            records += self._take(answers, posting.unwritten)
            for token in posting.waiting & self.outstanding.keys():
                self._fell_behind(self.outstanding[token], posting.actions)
        if self.outstanding:
            records += self._take(self._answers_in(), posting.unwritten)
        self._followed(posting.actions)
        return records

    def release(self, peer: Peer, actions: tuple[Action, ...], forget: bool = True) -> Posting | None:
        """The peer is about to be ended: its windows close first (not waited for if it is busy), then (`forget`) it
        is no longer reached. What came back: the posting, its records collected."""
        posting = None
        if actions:
            posting = self.post(actions, only=(peer,))
            posting.records = self.collect(posting)
            if peer.owed:
                logger.warning(
                    "%s did not close its windows before the job ended it (it is busy; NRL_PROFILE_TIMEOUT_S=%.0f): "
                    "its files of the window may be lost",
                    self.transport.describe(peer),
                    self.timeout_s,
                )
        if forget:
            self._forget(peer)
        return posting

    def drain(self) -> list[WindowRecord]:
        """At the end of the job: what late peers still owe, waited for once more."""
        if not self.outstanding:
            return []
        tokens = set(self.outstanding)
        records = self._take(self.transport.wait(self.outstanding, tokens, time.monotonic() + self.timeout_s))
        for peer in {self.outstanding.pop(token) for token in tokens & self.outstanding.keys()}:
            logger.warning("%s never answered its window actions; its files may be incomplete",
                           self.transport.describe(peer))  # fmt: skip
        return records

    def _answers_in(self) -> dict[object, Answer | Gone]:
        """Answers already in, taken without waiting."""
        if not self.outstanding:
            return {}
        return self.transport.wait(self.outstanding, set(), time.monotonic())

    def _take(self, answers: dict[object, Answer | Gone], unwritten: list | None = None) -> list[WindowRecord]:
        """The records of the answers; those to complete and write here go to `unwritten`."""
        records: list[WindowRecord] = []
        for token, answer in answers.items():
            peer = self.outstanding.pop(token, None)
            if peer is None:
                continue
            if isinstance(answer, Gone):
                records += self.gone(peer, answer)
                continue
            self._answered(peer, peer.owed.pop(0) if peer.owed else (), answer)
            records += answer.records
            if unwritten is not None:
                unwritten += answer.unwritten
        return records

    def _answered(self, peer: Peer, actions: tuple[Action, ...], answer: Answer) -> None:
        """The peer's windows once it applied the actions (its answer says which are open)."""
        for action in actions:
            kind = action.kind
            if not peer.takes(kind):
                continue
            if action.op == START:
                peer.windows.add(kind)
                peer.finishing.discard(kind)
            elif action.op == STOP and kind in peer.windows:
                peer.windows.discard(kind)
                if backend_class(kind).finishes_beside:
                    peer.finishing.add(kind)
            elif action.op == SETTLE:
                peer.finishing.discard(kind)
        peer.windows &= set(answer.open)

    def _followed(self, actions: tuple[Action, ...]) -> None:
        """Once the actions were applied: the windows they closed and opened, the steps they marked."""
        for action in actions:
            if action.op == STOP:
                stopped = self.windows.pop(action.kind, None)
                if stopped is not None and backend_class(action.kind).finishes_beside:
                    self.finishing[action.kind] = stopped
            elif action.op == SETTLE:
                self.finishing.pop(action.kind, None)
            elif action.op == START and action.kind in self.starting:
                self.finishing.pop(action.kind, None)
                self.windows[action.kind] = self.starting.pop(action.kind)
            if action.op in (START, STEP) and action.kind in self.windows:
                self.windows[action.kind].steps.append(action.step)
        self.starting = {}

    def gone(self, peer: Peer, gone: Gone) -> list[WindowRecord]:
        """A peer is gone: no longer reached, and each window it was in gets a record that says so."""
        started = {a.kind for batch in peer.owed for a in batch if a.op == START and peer.takes(a.kind)}
        during = {kind: window for kind in sorted(peer.windows | started)
                  if (window := self.windows.get(kind) or self.starting.get(kind)) is not None}  # fmt: skip
        after = {kind: window for kind in sorted(peer.finishing - during.keys())
                 if (window := self.finishing.get(kind) or self.windows.get(kind)) is not None}  # fmt: skip
        records = self.transport.gone_records(peer, gone, during, after, self.found_at)
        if self.write is not None:
            for record in records:
                self.write(record)
        self._forget(peer)
        return records

    def _forget(self, peer: Peer) -> None:
        self.transport.forget(peer)
        for token in [token for token, owner in self.outstanding.items() if owner is peer]:
            del self.outstanding[token]
        peer.owed.clear()
        peer.windows.clear()
        peer.finishing.clear()

    def _fell_behind(self, peer: Peer, actions: tuple[Action, ...]) -> None:
        if peer.late:
            return
        peer.late = True
        logger.warning(
            "%s did not answer %s within %.0f s (NRL_PROFILE_TIMEOUT_S): it is busy; not waited on again in this "
            "window, and its record will say 'late'",
            self.transport.describe(peer),
            "/".join(f"{a.kind} {a.op}" for a in actions),
            self.timeout_s,
        )
