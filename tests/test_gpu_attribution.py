"""GPU activities into step windows (tools.gpu_time), figures worked out by hand."""

from __future__ import annotations

import pytest

from nrlprof.tools.figures.gpu_time import KERNEL, MEMCPY, MEMSET, StepAttribution, StepGpu, longest_spans

# steps 1 and 2, given out of order, with a gap between them: [100, 200] and [300, 400] µs
WINDOWS = [(300.0, 400.0, 2), (100.0, 200.0, 1)]


def figures(activities: list[tuple], anchors: dict | None = None) -> dict[int, dict]:
    attribution = StepAttribution(WINDOWS)
    attribution.add_all(activities, anchors or {})
    return {step: gpu.to_json() for step, gpu in attribution.finish().items()}


def test_an_activity_counts_in_the_window_its_anchor_falls_in_and_nowhere_else():
    result = figures(
        [
            (50.0, 10.0, KERNEL, "before every step", None),
            (150.0, 10.0, KERNEL, "in step 1", None),
            (250.0, 10.0, KERNEL, "between the steps", None),
            (350.0, 20.0, KERNEL, "in step 2", None),
            (450.0, 10.0, KERNEL, "after every step", None),
            (310.0, 30.0, KERNEL, "launched in step 1, run in step 2", 7),
            (120.0, 5.0, KERNEL, "launched before step 1", 8),
        ],
        anchors={7: 190.0, 8: 90.0},
    )
    assert {step: (f["gpu_kernels"], f["gpu_kernel_ms"]) for step, f in result.items()} == {
        1: (2, 0.04),
        2: (1, 0.02),
    }


def test_busy_time_is_the_union_of_the_steps_activities_inside_its_window():
    result = figures(
        [
            (110.0, 40.0, KERNEL, "a", None),  # 110-150
            (130.0, 40.0, KERNEL, "b", None),  # 130-170, overlaps a: the union is 110-170
            (190.0, 30.0, KERNEL, "c", None),  # 190-220: only 190-200 is inside step 1
            (380.0, 10.0, MEMCPY, "copy", None),
            (392.0, 4.0, MEMSET, "set", None),
        ]
    )
    assert result[1]["gpu_busy_pct"] == 70.0 and result[1]["gpu_idle_ms"] == 0.03
    assert result[1]["gpu_kernel_ms"] == 0.11 and result[1]["memcpy_ms"] == 0.0
    assert result[2]["gpu_busy_pct"] == 14.0 and result[2]["memcpy_ms"] == 0.014
    assert result[2]["gpu_kernels"] == 0 and result[2]["gpu_kernel_ms"] == 0.0


def test_nccl_kernels_count_as_communication_and_as_kernels():
    result = figures(
        [
            (110.0, 20.0, KERNEL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", None),
            (140.0, 10.0, KERNEL, "ncclKernel_AllGather_RING_LL_Sum_int8_t", None),
            (160.0, 5.0, KERNEL, "sm90_xmma_gemm", None),
        ]
    )
    assert (result[1]["comm_ms"], result[1]["gpu_kernel_ms"], result[1]["gpu_kernels"]) == (0.03, 0.035, 3)


def test_exposed_collective_time_is_the_union_of_collectives_no_compute_kernel_overlaps():
    result = figures(
        [
            (110.0, 20.0, KERNEL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", None),  # 110-130
            (120.0, 20.0, KERNEL, "ncclDevKernel_AllGather_RING_LL", None),  # 120-140: overlaps the first
            (100.0, 15.0, KERNEL, "sm90_xmma_gemm", None),  # 100-115: hides 110-115
            (135.0, 10.0, KERNEL, "elementwise", None),  # 135-145: hides 135-140
        ]
    )
    # Collectives summed: 40 us; their union 110-140: 30 us; exposed: 30 - 5 - 5 = 20 us.
    assert (result[1]["comm_ms"], result[1]["comm_union_ms"], result[1]["exposed_comm_ms"]) == (0.04, 0.03, 0.02)


def test_a_collective_hidden_under_compute_is_not_exposed():
    result = figures(
        [
            (100.0, 50.0, KERNEL, "sm90_xmma_gemm", None),
            (110.0, 20.0, KERNEL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", None),
        ]
    )
    assert (result[1]["comm_union_ms"], result[1]["exposed_comm_ms"]) == (0.02, 0.0)


def test_a_step_that_appears_twice_adds_up():
    attribution = StepAttribution([(0.0, 10.0, 5), (20.0, 30.0, 5)])
    attribution.add_all([(2.0, 4.0, KERNEL, "k", None), (22.0, 6.0, KERNEL, "k", None)], {})
    (step,) = attribution.finish().items()
    assert step == (5, StepGpu(wall_us=20.0, kernel_us=10.0, busy_us=10.0, kernels=2))


def test_figures_of_an_empty_step_are_zero_not_an_error():
    assert StepGpu().to_json() == {
        "gpu_kernel_ms": 0.0,
        "gpu_busy_pct": 0.0,
        "gpu_idle_ms": 0.0,
        "comm_ms": 0.0,
        "memcpy_ms": 0.0,
        "gpu_kernels": 0,
        "comm_union_ms": 0.0,
        "exposed_comm_ms": 0.0,
    }
    assert StepGpu(wall_us=0.5, busy_us=0.25).to_json()["gpu_busy_pct"] == 50.0


def test_figures_are_milliseconds_to_the_microsecond():
    gpu = StepGpu(wall_us=3000.0, kernel_us=1234.5678, busy_us=2999.0, comm_us=876.5432, memcpy_us=1500.5004)
    assert gpu.to_json() == {
        "gpu_kernel_ms": 1.235,
        "gpu_busy_pct": 99.97,
        "gpu_idle_ms": 0.001,
        "comm_ms": 0.877,
        "memcpy_ms": 1.501,
        "gpu_kernels": 0,
        "comm_union_ms": 0.0,
        "exposed_comm_ms": 0.0,
    }


@pytest.mark.parametrize(
    "limit, kept",
    [(1, ["long"]), (2, ["long", "tie 1"]), (3, ["long", "tie 1", "tie 2"]), (9, ["short", "tie 1", "long", "tie 2"])],
)
def test_the_longest_spans_are_kept_earliest_first(limit, kept):
    spans = [(10.0, 15.0, "tie 1"), (0.0, 2.0, "short"), (20.0, 40.0, "long"), (50.0, 55.0, "tie 2")]
    assert [name for _, _, name in longest_spans(iter(spans), limit)] == sorted(
        kept, key=lambda n: next(s for s in spans if s[2] == n)
    )
