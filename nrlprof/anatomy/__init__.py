"""Step anatomy: every step, every worker group, from Ray's task events and the driver's step marks."""

from __future__ import annotations


def anatomy_summary(directory):
    from nrlprof.anatomy.model import anatomy_summary as summary

    return summary(directory)


def render_anatomy_text(model: dict) -> str:
    from nrlprof.anatomy.render import render_anatomy_text as render

    return render(model)


def anatomy_trace_events(directory) -> list[dict]:
    from nrlprof.anatomy.tracks import anatomy_trace_events as events

    return events(directory)


__all__ = ["anatomy_summary", "anatomy_trace_events", "render_anatomy_text"]
