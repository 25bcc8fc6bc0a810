"""Step ranges begun and ended out of order: step 1 ended twice, step 2 begun while step 3 begins, step 3 ended
(`python step_ranges_out_of_order.py`, under the nsys stand-in's NVTX injection library, which records the ranges)."""

from __future__ import annotations

from nrlprof.ranges.step_ranges import StepRanges

ranges = StepRanges()
ranges.begin_step(1)
ranges.end_step()
ranges.end_step()
ranges.begin_step(2)
ranges.begin_step(3)
ranges.end_step()
