"""A stand-in for Nsight Systems (`nsys`) on machines without a GPU: test code, never shipped.

Use: `tests/nsys_standin/nsys profile -o cap_%p --capture-range=cudaProfilerApi --capture-range-end=repeat:2
python prog.py`. Like nsys it launches the command as a child (`%p` is that child's pid; `%h` host, `%q{VAR}`,
`%n`, `%%`), forwards SIGTERM/SIGINT/SIGHUP to it and exits with its code (128+N when a signal N killed it).

The child gets, as nsys injects its own libraries:
- `LD_LIBRARY_PATH` led by a directory holding a fake CUDA runtime (`libcudart.so`, `.so.12`, `.so.13`, built
  from `fake_cudart.c` with `cc` on first use). Its `cudaProfilerStart`/`cudaProfilerStop` ask the stand-in over
  the Unix socket `NRLPROF_STANDIN_SOCKET` to open/close a capture range; stop returns only once the report is
  written. A start while a range is open, a stop with none open, or calls after the last range behave as in real
  CUDA: `cudaSuccess`, no effect. `cudaGetDeviceCount` says 1 device; `nrlprofStandInRuntime()` names it.
- `NVTX_INJECTION64_PATH` (unless `-t` leaves out nvtx): `fake_nvtx_injection.c`, recording NVTX events to
  `NRLPROF_STANDIN_NVTX_DIR/nvtx-<pid>.jsonl`.

Each finished range is written as `<name>.qdstrm`, then "imported" to `<name>.nsys-rep` (`stop`,
`stop-shutdown`, `none`, or no capture range: the whole run, written at exit) or `<name>.<k>.nsys-rep`
(`repeat[:K]`, `repeat-shutdown:K`), and the `.qdstrm` is deleted. As real nsys 2025.3 did on an H200, the
reports of a `repeat` are written together: those of `repeat:K` when the K-th range ends (its cudaProfilerStop
blocks while all are written), those of an unbounded `repeat` only when the application exits. `nsys launch`,
`nsys start` and `nsys stop` run interactive sessions, each collection's report written when it ends
(`sessions.py`). A report is JSON (see `report.py`);
`nsys export --type sqlite` turns it into the tables of a real export (`NVTX_EVENTS`, `StringIds`, an empty
`CUPTI_ACTIVITY_KIND_KERNEL`, ...). A child killed by a signal while a range is open leaves no report for it.

The socket and NVTX files live in `<tmp>/nsys-standin-<nsys pid>-*/`, removed at exit (and, for stand-ins that
were killed, by the next stand-in). For CPU machines only: the fake `libcudart.so` would shadow a real CUDA
runtime that a CUDA build of torch loads through the library path.

Environment of the stand-in:
- `NRLPROF_FAKE_TOOL_LOG`: directory for the call record `nsys-<nsys pid>.json` (options, command, pid of the
  launched process, nsys_pid, time, env).
- `NRLPROF_STANDIN_CACHE`: where the libraries are built (default `<tmp>/nrlprof-nsys-standin-<uid>`).
- `NRLPROF_STANDIN_IMPORT_FAIL=1`: the importer fails; only the `.qdstrm` stays and stderr says
  `Importer error status: Importation failed.`
- `NRLPROF_STANDIN_STOP_DELAY_S=N`: each range's stop blocks N more seconds while the report is "written".

The package also holds the rocprof-sys stand-in (`rocprof.py`); both tools write their call record with
`calls.py`.
"""
