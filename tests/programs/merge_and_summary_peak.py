"""Merge and summary of one run directory in a process of their own, its address space capped at 4 GiB (a
regression fails, it does not swap): prints, as JSON, the peak memory Python traced and the reasons of the traces
skipped (`python merge_and_summary_peak.py <run dir> <timeline.json>`)."""

from __future__ import annotations

import json
import resource
import sys
import tracemalloc

resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from nrlprof.tools.figures.summarize import summarize  # noqa: E402  # under the cap: what they load counts
from nrlprof.tools.merge.timeline import merge_traces  # noqa: E402

root, output = sys.argv[1:]
tracemalloc.start()
merged = merge_traces([root], output, jobs=1)
summary = summarize(root, nsys="")
skipped = [reason for _, reason in merged.skipped + summary.skipped]
print(json.dumps({"peak": tracemalloc.get_traced_memory()[1], "skipped": skipped}))
