"""NeMo RL: its own profiling helpers taken over, so only nrlprof acts on the NRL_* variables.

NeMo RL's `nemo_rl.utils.nsys` reads NRL_NSYS_WORKER_PATTERNS / NRL_NSYS_PROFILE_STEP_RANGE at import, and
its algorithm loops call `maybe_gpu_profile_step(policy, step)` every step. Right after that module is
imported (before the algorithm modules take names from it), nrlprof puts its own `maybe_gpu_profile_step`
in place (the step, for nrlprof's gate: nrlprof reaches every matched worker itself, so the policy's
`start_gpu_profiling()` is not called), and blanks the module's copies of the variables, so NeMo's own
code neither launches workers under a second nsys nor parses nrlprof's step lists. Its
`get_nsight_config_if_pattern_matches` gives no `nsight` key: nrlprof's creation hook gives its own.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from nrlprof.log import logger
from nrlprof.process import patches
from nrlprof.process.host import ControllerHost, Host

STEP_SOURCE = "NeMo RL's maybe_gpu_profile_step"
# NeMo RL's module-level copies of the variables, and what they become.
BLANKED = {"NRL_NSYS_WORKER_PATTERNS": "", "NRL_NSYS_PROFILE_STEP_RANGE": "", "NRL_NSYS_EXTRA_OPTIONS": {}}


def take_over_nsys_helpers(session: ControllerHost, module: ModuleType) -> None:
    def maybe_gpu_profile_step(policy: Any, step: int) -> None:
        session.framework_step(int(step), STEP_SOURCE)

    patches.install_with_copies(
        "nemo_rl.utils.nsys.maybe_gpu_profile_step", module, "maybe_gpu_profile_step", lambda _: maybe_gpu_profile_step
    )
    for name, blank in BLANKED.items():
        if hasattr(module, name):
            patches.install_with_copies(f"nemo_rl.utils.nsys.{name}", module, name, lambda _, value=blank: value)
    logger.info("nrlprof took over NeMo RL's profiling helpers (nemo_rl.utils.nsys): its steps drive nrlprof's windows")


def take_over_nsight_config(session: Host, module: ModuleType) -> None:
    if not hasattr(module, "get_nsight_config_if_pattern_matches"):
        return

    def get_nsight_config_if_pattern_matches(worker_name: str) -> dict:
        return {}

    patches.install_with_copies(
        "nemo_rl.distributed.worker_group_utils.get_nsight_config_if_pattern_matches",
        module,
        "get_nsight_config_if_pattern_matches",
        lambda _: get_nsight_config_if_pattern_matches,
    )
