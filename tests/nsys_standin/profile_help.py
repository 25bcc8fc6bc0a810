"""`nsys profile --help` as Nsight Systems 2025.3 prints it, and its refusal of an option it does not know.

Real nsys lists each option as a tab-indented declaration (`-t, --trace=` or `--capture-range-end=`), a blank
line, then its description indented by a tab and three spaces; an option it does not know ends the command
with `unrecognised option '--x'`, the usage line and `Try 'nsys profile --help' for more information.`, exit 1.
The stand-in knows the options below (those of the Linux x86_64 CLI), and only their names are checked.
"""

from __future__ import annotations

USAGE = "usage: nsys profile [<args>] [application] [<application args>]"
TRY_HELP = "Try 'nsys profile --help' for more information."

# (short letter or "", long name, first line of the description)
OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("", "accelerator-trace", "Possible values are 'none' or 'tpu'."),
    ("b", "backtrace", "Possible values are 'auto', 'fp', 'lbr', 'dwarf', or 'none'."),
    ("c", "capture-range", "Possible values are none, cudaProfilerApi, nvtx, hotkey."),
    (
        "",
        "capture-range-end",
        "Possible values are 'none', 'stop', 'stop-shutdown', 'repeat[:N]' or 'repeat-shutdown:N'.",
    ),
    ("", "cpu-core-events", "Collect per-core PMU counters."),
    ("", "cpuctxsw", "Possible values are 'process-tree', 'system-wide', or 'none'."),
    ("", "cuda-event-trace", "Possible values are 'true' or 'false'."),
    ("", "cuda-flush-interval", "Set the interval, in milliseconds, when buffered CUDA data is automatically saved."),
    ("", "cuda-graph-trace", "Possible values are 'graph' or 'node'."),
    ("", "cuda-memory-usage", "Possible values are 'true' or 'false'."),
    ("", "cuda-trace-all-apis", "Possible values are 'true' or 'false'."),
    ("", "cuda-um-cpu-page-faults", "Possible values are 'true' or 'false'."),
    ("", "cuda-um-gpu-page-faults", "Possible values are 'true' or 'false'."),
    ("", "cudabacktrace", "Possible values are 'all', 'none', 'kernel', 'memory', 'sync', 'other'."),
    ("d", "duration", "Collection duration in seconds."),
    ("", "duration-frames", "Stop the recording session after this many frames have been captured."),
    ("e", "env-var", "Set environment variable(s) for the application process to be launched."),
    ("", "export", "Possible values are 'none', 'sqlite', 'hdf', 'text', 'json', 'arrow', 'arrowdir', 'parquetdir'."),
    ("f", "force-overwrite", "Possible values are 'true' or 'false'."),
    ("", "gpu-metrics-devices", "Collect GPU Metrics from specified devices."),
    ("", "gpu-metrics-frequency", "Specify GPU Metrics sampling frequency."),
    ("", "gpu-metrics-set", "Specify metric set for GPU Metrics sampling."),
    ("", "gpuctxsw", "Possible values are 'true' or 'false'."),
    ("h", "help", "Print the command's help menu."),
    ("", "hotkey-capture", "Possible values are 'F1' to 'F12'."),
    ("", "ib-switch-metrics-devices", "Collect metrics from the specified InfiniBand switches."),
    ("", "isr", "Possible values are 'true' or 'false'."),
    ("", "kill", "Possible values are 'none', 'sigkill', 'sigterm', or signal number."),
    ("", "mpi-impl", "Possible values are 'openmpi' or 'mpich'."),
    ("n", "inherit-environment", "Possible values are 'true' or 'false'."),
    ("", "nic-metrics", "Possible values are 'true' or 'false'."),
    ("", "nvtx-domain-exclude", "Choose NVTX domains to exclude."),
    ("", "nvtx-domain-include", "Choose NVTX domains to include."),
    ("o", "output", "Output report filename."),
    ("", "os-events", "Select the OS events to sample."),
    ("", "osrt-backtrace-depth", "Set the depth for the backtraces collected for OS runtime libraries calls."),
    ("", "osrt-backtrace-stack-size", "Set the stack dump size, in bytes, to generate backtraces for OS runtime."),
    (
        "",
        "osrt-backtrace-threshold",
        "Set the duration, in nanoseconds, that all OS runtime libraries calls must "
        "execute before backtraces are collected.",
    ),
    (
        "",
        "osrt-threshold",
        "Set the duration, in nanoseconds, that Operating System Runtime (osrt) APIs must "
        "execute before they are traced.",
    ),
    ("p", "nvtx-capture", "Specify NVTX range and domain to trigger the capture range."),
    ("", "process-scope", "Possible values are 'main', 'process-tree' or 'system-wide'."),
    ("", "python-backtrace", "Possible values are 'cuda', 'none', 'false'."),
    ("", "python-functions-trace", "Specify the path to a JSON file with the Python functions to trace."),
    ("", "python-sampling", "Possible values are 'true' or 'false'."),
    ("", "python-sampling-frequency", "Specify the Python sampling frequency."),
    (
        "",
        "pytorch",
        "Possible values are 'autograd-nvtx', 'autograd-shapes-nvtx', 'functions-trace', "
        "'functions-trace-shapes' or 'none'.",
    ),
    ("", "resolve-symbols", "Possible values are 'true' or 'false'."),
    ("", "run-as", "Run the target application as the specified username."),
    ("s", "sample", "Possible values are 'process-tree', 'system-wide' or 'none'."),
    ("", "sampling-frequency", "Specify the sampling/backtracing frequency."),
    (
        "",
        "sampling-period",
        "The number of CPU Cycle events counted before a CPU instruction pointer sample is collected.",
    ),
    ("", "sampling-trigger", "Possible values are 'timer', 'sched', 'perf', 'cuda'."),
    ("", "session", "Launch the application in the given session."),
    ("", "session-new", "Launch the application in a new session."),
    ("w", "show-output", "Possible values are 'true' or 'false'."),
    ("", "start-frame-index", "Start the recording session when the frame index reaches this frame number."),
    ("Y", "start-later", "Possible values are 'true' or 'false'."),
    ("", "stats", "Possible values are 'true' or 'false'."),
    ("x", "stop-on-exit", "Possible values are 'true' or 'false'."),
    (
        "t",
        "trace",
        "Possible values are 'cuda', 'nvtx', 'cublas', 'cublas-verbose', 'cusolver', 'cusolver-verbose', "
        "'cusparse', 'cusparse-verbose', 'mpi', 'oshmem', 'ucx', 'osrt', 'cudnn', 'opengl', "
        "'opengl-annotations', 'openacc', 'openmp', 'nvvideo', 'vulkan', 'vulkan-annotations', "
        "'python-gil' or 'none'.",
    ),
    ("", "trace-fork-before-exec", "Possible values are 'true' or 'false'."),
    ("", "wait", "Possible values are 'primary' or 'all'."),
    ("y", "delay", "Collection start delay in seconds."),
)

LONG_NAMES = frozenset(long for _, long, _ in OPTIONS)
SHORT_NAMES = {short: long for short, long, _ in OPTIONS if short}


def profile_help() -> str:
    lines = [USAGE, "args:"]
    for short, long, description in sorted(OPTIONS, key=lambda option: option[1]):
        declaration = f"-{short}, --{long}=" if short else f"--{long}="
        if long == "help":
            declaration = "-h, --help=[<tag>]"
        lines += [f"\t{declaration}", "", f"\t   {description}", ""]
    return "\n".join(lines) + "\n"


def unknown_option(words: list[str], long_with_value: set[str] | frozenset[str]) -> str | None:
    """The first option of `words` (the option words of a command line, values included) nsys would refuse, as
    it names it; None when it knows every one. `long_with_value`: long options whose value may be the next word."""
    rest = list(words)
    while rest:
        word = rest.pop(0)
        if word.startswith("--"):
            name, has_value, _ = word[2:].partition("=")
            if name not in LONG_NAMES:
                return f"--{name}"
            if not has_value and name in long_with_value and rest:
                rest.pop(0)
        elif word.startswith("-") and len(word) == 2:
            if word[1] not in SHORT_NAMES:
                return word
            if rest:
                rest.pop(0)
    return None


def refusal(option: str) -> str:
    return f"unrecognised option '{option}'\n\n{USAGE}\n{TRY_HELP}\n"
