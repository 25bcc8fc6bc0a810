"""Windows asked for in an armed job that this test process drives: the request sent with the client API
(`nrlprof capture`'s own), the job stepped until the window has closed; and the runtime_env that gives an actor the
armed job's settings, as `ray.init` after `import nrlprof` gives them to every worker of a job."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nrlprof.config.requests import ACCEPTED, CLOSED, OPENED, REFUSED, Reply, Request


def ask(nrlprof: Any, work: Callable[[int], object], request: Request, first_step: int) -> tuple[Reply, int]:
    """Send the request and step the job (`work(step)` once per step) until its window has closed or it was
    refused; the last answer and the next step."""
    from nrlprof.tools.capture import client

    client.send(request)
    step, reply = first_step, None
    for step in range(first_step, first_step + 60):
        nrlprof.step(step)
        work(step)
        reply = client.wait_for(request, (OPENED,), timeout_s=0.3) or reply
        if reply is not None and reply.state == OPENED:
            reply = client.wait_for(request, (CLOSED,), timeout_s=0.3) or reply
        if reply is not None and reply.state in (CLOSED, REFUSED):
            return reply, step + 1
    raise AssertionError(f"no final answer: {reply}")


def asked_steps(reply: Reply) -> set[int]:
    return set(range(reply.first, reply.last + 1))


def asked_records(ray: Any, request_id: str) -> list[dict]:
    """The manifest records of one window asked for, in the Ray session's manifests (which hold other windows')."""
    session_dir = Path(ray._private.worker.global_worker.node.get_session_dir_path())
    records = []
    for manifest in (session_dir / "logs" / "nrlprof").glob("manifest-*.jsonl"):
        records += [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("asked") == request_id]


def armed_runtime_env(nrlprof: Any) -> dict:
    """The env_vars an armed driver's `ray.init` gives its job's workers (this test's driver joined Ray first)."""
    from nrlprof.process import state
    from nrlprof.runtime.job_env import forwarded_variables

    return {"env_vars": forwarded_variables(state.session.plan.to_json(), None)}


def ask_in_background(
    workers: tuple[str, ...], steps: int, backend: str = "torch", after_step: int = 2
) -> threading.Thread:
    """In an armed job's driver, as `nrlprof capture` from another process does: once the job's card shows step
    `after_step`, ask for a window of `steps` steps in `workers`; its final answer printed as `ANSWER <json>`. The
    thread ends with the answer, so a job can step until it has ended; its `taken` event is set once the job's
    controller took the request (the window opens at its next step) or refused it."""
    from nrlprof.tools.capture import client

    taken = threading.Event()

    def ask() -> None:
        import ray

        job = ray.get_runtime_context().get_job_id()
        while not any(card.job == job and (card.step or 0) >= after_step for card in client.armed_jobs()):
            time.sleep(0.2)
        request = Request(job, backend, workers, steps)
        client.send(request)
        reply = client.wait_for(request, (ACCEPTED, OPENED), timeout_s=120)
        taken.set()
        if reply is not None and reply.state not in (CLOSED, REFUSED):
            reply = client.wait_for(request, (CLOSED, REFUSED), timeout_s=120)
        print("ANSWER", "null" if reply is None else reply.to_json(), flush=True)

    asker = threading.Thread(target=ask, name="asker", daemon=True)
    asker.taken = taken  # type: ignore[attr-defined]
    asker.start()
    return asker


def printed_answer(stdout: str) -> Reply:
    """The answer `ask_in_background` printed."""
    return Reply.from_json(stdout.split("ANSWER", 1)[1].splitlines()[0])


def asked_window_of(result: Any) -> set[int]:
    """The steps of the 2-step window `ask_in_background` asked for in a job run as `result` (a finished driver), once
    checked: closed, opened at a step boundary after step 2, and (where the job printed `LAST <step>`) followed by
    more steps of the job."""
    answer = printed_answer(result.stdout)
    assert answer.state == CLOSED, (answer, result.stderr[-6000:])
    steps = asked_steps(answer)
    assert len(steps) == 2 and min(steps) >= 3, "the window opens at a step boundary after step 2 was seen"
    if "LAST" in result.stdout:
        assert answer.last < int(result.stdout.split("LAST")[1].split()[0]), "the job stepped on after the window"
    return steps
