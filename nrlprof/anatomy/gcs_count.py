"""How many tasks of one job Ray's GCS has had: those it holds and those it let go.

The GCS keeps `RAY_task_events_max_num_task_in_gcs` tasks and counts, per job, the task attempts it let go (its
cap, or a worker whose event buffer overflowed).  Neither count comes with `GlobalStateAccessor.get_task_events()`;
both come with the GCS's `GetTaskEvents` reply, which takes a job filter and a limit: asked for one task, the
GCS still counts the job's whole store, so the question costs the reader one small message.  The reader compares
the answer with the tasks it has seen: the difference is the calls lost before a read saw them.
"""

from __future__ import annotations

GCS_OK = 0
QUERY_TIMEOUT_S = 10.0


class JobTaskCount:
    """Call it for the number of tasks of `job_id` the GCS has held since the job began (held + let go)."""

    def __init__(self, gcs_address: str, job_id: bytes, timeout_s: float = QUERY_TIMEOUT_S) -> None:
        from nrlprof import rayapi

        self._channel = rayapi.gcs_channel(gcs_address)
        self._stub, self._request = rayapi.job_task_events_query(self._channel, job_id, limit=1)
        self.timeout_s = timeout_s

    def __call__(self) -> int:
        reply = self._stub.GetTaskEvents(self._request, timeout=self.timeout_s)
        if reply.status.code != GCS_OK:
            raise RuntimeError(f"the GCS refused the task-event count: {reply.status.message}")
        # As Ray's state API totals a job's tasks: those returned, and those "dropped", in which Ray counts the ones
        # the limit left out of the reply beside those it let go.  (`num_total_stored` is the whole store's.)
        return len(reply.events_by_task) + reply.num_status_task_events_dropped

    def close(self) -> None:
        self._channel.close()


def job_task_count(gcs_address: str, job_id: bytes) -> JobTaskCount | None:
    """A count for the job, or None where this Ray cannot give one (the reads then only say calls may be lost)."""
    try:
        return JobTaskCount(gcs_address, job_id)
    except Exception:
        return None
