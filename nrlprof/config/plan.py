"""The immutable profiling plan every other module reads, and its JSON form for workers (nrlprof.wire)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from nrlprof import wire
from nrlprof.config.slow import SlowSettings
from nrlprof.config.steps import MAX_STEP, StepSelection

NSYS = "nsys"
TORCH = "torch"
ROCPROF = "rocprof"
MEMORY = "memory"

DEFAULT_TORCH_DIR = "torch_profiler_trace"
DEFAULT_TIMEOUT_S = 120.0
MAX_RANK = MAX_STEP


@dataclass(frozen=True)
class Target:
    """One selector: workers whose names match `pattern`, restricted to `ranks` (None: all)."""

    pattern: str
    ranks: frozenset[int] | None = None
    discrete: bool = False
    methods: tuple[str, ...] = ()
    # From RLinf's `worker_groups`: matched as RLinf matches its groups (nrlprof.workers.matching).
    rlinf_groups: bool = False

    def selects_rank(self, rank: int) -> bool:
        return self.ranks is None or rank in self.ranks


@dataclass(frozen=True)
class BackendPlan:
    """What one backend profiles: which workers, which steps, with which tool options."""

    kind: str
    targets: tuple[Target, ...]
    steps: StepSelection | None
    options: tuple[tuple[str, str], ...] = ()
    flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    output_dir: str | None = None
    controller: bool = True
    # Armed for slow steps (nrlprof.config.slow): WINDOW (a window opens at the step after a slow one) or KEEP (every
    # step recorded, the slow ones kept); its steps then hold no planned window, only those slow steps open.
    slow: str = ""

    @property
    def options_dict(self) -> dict[str, str]:
        return dict(self.options)


@dataclass(frozen=True)
class TorchSettings:
    directory: str = DEFAULT_TORCH_DIR
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    gzip: bool = False


@dataclass(frozen=True)
class OnDemand:
    """An armed job (NRL_PROFILE_ON_DEMAND): what windows asked for while it runs use where no pattern set it.

    `memory_dir`, `memory_options`: the memory backend's directory and settings (NRL_MEMORY_PROFILE_*); the torch
    directory and switches are the plan's own. `nsys`: the plan's nsys backend (no steps) launches its workers under
    nsys with a capture range and no window until one is asked for (NRL_NSYS_PROFILE_STEP_RANGE=on-demand).
    """

    memory_dir: str = "memory_profile"
    memory_options: tuple[tuple[str, str], ...] = ()
    nsys: bool = False


@dataclass(frozen=True)
class StepMethod:
    """NRL_STEP_METHOD: a step begins at each run of calls of `method` on workers matching `worker`."""

    worker: str
    method: str

    @property
    def text(self) -> str:
        return f"{self.worker}.{self.method}"


@dataclass(frozen=True)
class Plan:
    backends: tuple[BackendPlan, ...] = ()
    torch: TorchSettings = field(default_factory=TorchSettings)
    log_level: str = "INFO"
    timeout_s: float = DEFAULT_TIMEOUT_S
    sources: tuple[str, ...] = ()
    step_method: StepMethod | None = None
    # Read the framework's own profiling config (verl's) when its trainer starts.
    framework_config: bool = False
    # nsys options for the controller when it is an actor the driver creates (verl's controller_nsight_options).
    controller_nsys: tuple[tuple[str, str], ...] = ()
    # NRL_PROFILE_MAX_HOST_MB: None, a share of the node's memory per process; 0, no budget.
    max_host_mb: int | None = None
    on_demand: OnDemand | None = None
    # Set where a backend is armed for slow steps (BackendPlan.slow).
    slow: SlowSettings | None = None

    @property
    def controller_nsys_options(self) -> dict[str, str]:
        return dict(self.controller_nsys)

    @property
    def active(self) -> bool:
        return bool(self.backends)

    @property
    def configured(self) -> bool:
        """Something to do in a driver beside step anatomy: a backend, a step marker, the framework's own config,
        windows asked for."""
        return self.active or self.step_method is not None or self.framework_config or self.on_demand is not None

    @property
    def armed(self) -> bool:
        """Windows open while the job runs without a plan of steps: asked for (`nrlprof capture`), or for slow
        steps."""
        return self.on_demand is not None or self.slow is not None

    def backend(self, kind: str) -> BackendPlan | None:
        for plan in self.backends:
            if plan.kind == kind:
                return plan
        return None

    def with_backend(self, backend: BackendPlan) -> Plan:
        others = tuple(b for b in self.backends if b.kind != backend.kind)
        return replace(self, backends=(*others, backend))

    def to_json(self) -> str:
        return wire.encode(self, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        return wire.decode(text, cls)
