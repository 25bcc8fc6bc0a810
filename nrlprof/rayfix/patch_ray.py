"""Fix Ray's nsight and rocprof-sys runtime-env plugins on disk (`nrlprof patch-ray`).

Ray's plugins drop the interpreter chosen by earlier plugins and do not quote the
profiler command.  The plugins run in the runtime-env agent, which a patch in the
driver's memory does not reach, so this appends the fixed methods (the source of
`fix.py`, beside this file) to the installed plugin modules, between
two marker lines.  `--revert` removes that block and restores the original bytes.

Standard library only: SLURM scripts run it by path on nodes where nrlprof is not
installed (`python nrlprof/rayfix/patch_ray.py [--check|--revert] [--ray-dir DIR]`); it reads `fix.py`,
`names.py` and `plugin_source.py` beside it.
"""

import os
import sys

# Run by path, sys.path[0] is nrlprof/ itself: keep sibling modules from shadowing the standard library.
if (
    __name__ == "__main__"
    and sys.path
    and os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__))
):
    del sys.path[0]

import argparse
import ast
import contextlib
import hashlib
import importlib
import importlib.util
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

FIX_SOURCE = Path(__file__).with_name("fix.py")


def _sibling(name: str) -> ModuleType:
    """A module of nrlprof.rayfix: imported from the package, or loaded from the file beside this one by path."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    spec = importlib.util.spec_from_file_location(f"_nrlprof_rayfix_{name}", Path(__file__).with_name(f"{name}.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {name}.py beside {__file__}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _error_base() -> type[Exception]:
    """nrlprof's root error when imported from the package; a plain Exception when run by path."""
    if __package__:
        from nrlprof.errors import NrlprofError

        return NrlprofError
    return Exception


names = _sibling("names")
plugin_source = _sibling("plugin_source")
HOOK_CLASS_PATH: str = names.HOOK_CLASS_PATH
HOOK_SETTING: str = names.HOOK_SETTING
PATCHED: str = names.PATCHED
UNPATCHED: str = names.UNPATCHED
UPSTREAM_FIXED: str = names.UPSTREAM_FIXED
MISSING: str = names.MISSING
UNRECOGNISED: str = names.UNRECOGNISED
FIXED_STATES: tuple[str, ...] = names.FIXED_STATES

EXIT_OK = 0
EXIT_UNFIXED = 1
EXIT_FAILED = 2

_BEGIN = re.compile(rb"\n# >>> nrlprof ray-plugin-fix v(\d+) ([0-9a-f]{12}) >>>[^\n]*\n")
_END = re.compile(rb"# <<< nrlprof ray-plugin-fix v\d+ <<<\n")
_IN_MEMORY_ROUTE = (
    f"set {HOOK_SETTING} before `ray start` on every node (nrlprof sets it itself for clusters that the driver starts)"
)


@dataclass(frozen=True)
class Plugin:
    key: str
    relpath: str
    class_name: str
    apply_function: str


PLUGINS = (
    Plugin("nsight", "_private/runtime_env/nsight.py", "NsightPlugin", "apply_nsight_fix"),
    Plugin("rocprof_sys", "_private/runtime_env/rocprof_sys.py", "RocProfSysPlugin", "apply_rocprof_fix"),
)


class PatchError(_error_base()):  # type: ignore[misc]
    """A plugin file could not be patched or reverted; the message says why and what to do."""


@dataclass(frozen=True)
class FileState:
    plugin: Plugin
    path: Path | None
    state: str
    fix_version: int | None = None
    block_hash: str | None = None
    detail: str = ""
    unterminated: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "relpath": self.plugin.relpath,
            "path": None if self.path is None else str(self.path),
            "state": self.state,
            "fix_version": self.fix_version,
        }

    def describe(self) -> str:
        version = f" (fix v{self.fix_version})" if self.fix_version is not None else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.plugin.relpath}: {self.state}{version}{detail} [{self.path}]"


@dataclass(frozen=True)
class FixBlock:
    version: int
    source: str

    def body(self, plugin: Plugin) -> str:
        return f"{self.source.rstrip()}\n\n{plugin.apply_function}({plugin.class_name})\n"

    def digest(self, plugin: Plugin) -> str:
        return hashlib.sha256(self.body(plugin).encode()).hexdigest()[:12]

    def render(self, plugin: Plugin) -> bytes:
        """The bytes appended to the plugin file; the leading newline belongs to the block, so revert is exact."""
        begin = f"# >>> nrlprof ray-plugin-fix v{self.version} {self.digest(plugin)} >>>"
        note = "appended by `nrlprof patch-ray`; undo with `nrlprof patch-ray --revert`"
        end = f"# <<< nrlprof ray-plugin-fix v{self.version} <<<"
        return f"\n{begin} {note}\n{self.body(plugin)}{end}\n".encode()


def find_ray_dir(ray_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The Ray package directory: `ray_dir` if given, else where `import ray` would load it from."""
    if ray_dir is not None:
        return Path(ray_dir)
    try:
        spec = importlib.util.find_spec("ray")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def inspect_ray(ray_dir: str | os.PathLike[str] | None = None) -> dict[str, dict[str, object]]:
    """State of each plugin file, keyed "nsight" / "rocprof_sys".

    Each value: {"relpath": str, "path": str | None, "state": str, "fix_version": int | None}, with state one of
    "patched", "unpatched", "upstream-fixed", "missing", "unrecognised" (not the plugin code we know how to fix).
    """
    root = find_ray_dir(ray_dir)
    return {plugin.key: inspect_file(root, plugin).as_dict() for plugin in PLUGINS}


def inspect_file(root: Path | None, plugin: Plugin) -> FileState:
    if root is None:
        return FileState(plugin, None, MISSING, detail="Ray not found")
    path = root / plugin.relpath
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FileState(plugin, path, MISSING)
    except OSError as err:
        return FileState(plugin, path, UNRECOGNISED, detail=f"cannot read it ({err.strerror or err})")
    blocks = _find_blocks(data)
    if blocks and blocks[-1][1] is None:
        begin = blocks[-1][2]
        line = data.count(b"\n", 0, begin.start()) + 2
        detail = f"nrlprof's fix block (from line {line}) has lost its end marker"
        return FileState(plugin, path, UNRECOGNISED, int(begin.group(1)), detail=detail, unterminated=True)
    if blocks:
        begin = blocks[-1][2]
        return FileState(plugin, path, PATCHED, int(begin.group(1)), begin.group(2).decode())
    state, detail = _classify(data, plugin)
    return FileState(plugin, path, state, detail=detail)


def _find_blocks(data: bytes) -> list[tuple[int, int | None, re.Match[bytes]]]:
    """(start, end, begin marker) of each nrlprof block; end is None for a block whose end marker is gone."""
    blocks: list[tuple[int, int | None, re.Match[bytes]]] = []
    position = 0
    while (begin := _BEGIN.search(data, position)) is not None:
        end = _END.search(data, begin.end())
        if end is None:
            blocks.append((begin.start(), None, begin))
            break
        blocks.append((begin.start(), end.end(), begin))
        position = end.end()
    return blocks


def strip_blocks(data: bytes) -> bytes:
    """The file as it was before `patch-ray` appended to it; refuses a block whose end marker is gone."""
    kept = []
    position = 0
    for start, stop, _ in _find_blocks(data):
        if stop is None:
            raise PatchError("nrlprof's fix block has lost its end marker; cannot tell where it ends")
        kept.append(data[position:start])
        position = stop
    kept.append(data[position:])
    return b"".join(kept)


def _classify(data: bytes, plugin: Plugin) -> tuple[str, str]:
    detail = plugin_source.problem(data, plugin.class_name)
    if detail is not None:
        return UNRECOGNISED, detail
    if plugin_source.keeps_interpreter_and_quotes(data, plugin.class_name):
        return UPSTREAM_FIXED, "keeps context.py_executable and quotes the command"
    return UNPATCHED, ""


def load_fix_block(source_path: Path | None = None) -> FixBlock:
    path = source_path or FIX_SOURCE
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
    except OSError as err:
        raise PatchError(f"cannot read the fix module {path}: {err.strerror or err}") from None
    except (SyntaxError, ValueError) as err:
        raise PatchError(f"the fix module {path} does not parse: {err}") from None
    if _BEGIN.search(source.encode()) or _END.search(source.encode()):
        raise PatchError(f"{path} contains nrlprof's marker lines; it cannot be appended as a block")
    return FixBlock(_fix_version(tree, path), source)


def _fix_version(tree: ast.Module, path: Path) -> int:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "NRLPROF_FIX_VERSION" for target in node.targets
        ):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, int):
                return value.value
    raise PatchError(f"{path} defines no integer NRLPROF_FIX_VERSION")


def _top_level_bindings(tree: ast.Module) -> dict[str, str]:
    """Name -> what binds it at module level: "import <module>[.<name>]" for imports, else the statement type."""
    bindings: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            bindings.update({alias.asname or alias.name.split(".")[0]: f"import {alias.name}" for alias in node.names})
        elif isinstance(node, ast.ImportFrom):
            bindings.update({alias.asname or alias.name: f"import {node.module}.{alias.name}" for alias in node.names})
        else:
            bindings.update(dict.fromkeys(_bound_names(node), type(node).__name__))
    return bindings


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    return [child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)]


def check_no_clash(original: bytes, block: FixBlock, path: Path) -> None:
    """Refuse to rebind a name of Ray's module to something else (the same import twice is fine)."""
    ray_names = _top_level_bindings(ast.parse(original))
    fix_names = _top_level_bindings(ast.parse(block.source))
    clashes = sorted(
        name
        for name, binding in fix_names.items()
        if name in ray_names and not (binding.startswith("import ") and ray_names[name] == binding)
    )
    if clashes:
        raise PatchError(f"the fix would rebind {', '.join(clashes)} in {path}; not patching it")


def build_patched(data: bytes, plugin: Plugin, block: FixBlock, path: Path) -> bytes:
    original = strip_blocks(data)
    check_no_clash(original, block, path)
    patched = original + block.render(plugin)
    try:
        compile(patched, str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as err:
        raise PatchError(f"{path} would not compile once patched ({err}); left unchanged") from None
    return patched


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` by `data` in one step: temp file in the same directory, fsync, original mode, rename."""
    mode = path.stat()
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".nrlprof-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp_name, stat.S_IMODE(mode.st_mode))
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            with contextlib.suppress(OSError):
                os.chown(temp_name, mode.st_uid, mode.st_gid)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def stale_bytecode(path: Path) -> list[Path]:
    """Compiled copies of `path` in its `__pycache__` (every interpreter and optimisation level)."""
    cache = path.parent / "__pycache__"
    return sorted(cache.glob(f"{path.stem}.*.pyc")) if cache.is_dir() else []


def remove_bytecode(path: Path) -> None:
    """Python may keep loading an unchecked-hash `.pyc` of the old source: remove every compiled copy."""
    for compiled in stale_bytecode(path):
        try:
            compiled.unlink(missing_ok=True)
        except OSError as err:
            raise PatchError(
                f"cannot remove {compiled} ({err.strerror or err}); Python could keep running the old {path.name} "
                "from it. Remove it as a user who can write there, then run again."
            ) from None


def _write(path: Path, data: bytes, journal: list[tuple[Path, bytes]] | None = None) -> None:
    """Replace the file and its stale bytecode; `journal` records the previous bytes for a rollback."""
    previous = path.read_bytes()
    try:
        atomic_write(path, data)
    except OSError as err:
        raise PatchError(
            f"cannot write {path} ({err.strerror or err}). Run `nrlprof patch-ray` as a user who can write to "
            f"Ray's installation (or in the image build), or use the in-memory route instead: {_IN_MEMORY_ROUTE}."
        ) from None
    if journal is not None:
        journal.append((path, previous))
    remove_bytecode(path)


def roll_back(journal: list[tuple[Path, bytes]]) -> list[str]:
    """Put back the files written so far, newest first; returns a note per file that could not be restored."""
    failures = []
    for path, previous in reversed(journal):
        try:
            atomic_write(path, previous)
            remove_bytecode(path)
        except (OSError, PatchError) as err:
            failures.append(f"{path}: {err}")
    journal.clear()
    return failures


def _lost_end_marker(current: FileState) -> PatchError:
    apply_line = f"{current.plugin.apply_function}({current.plugin.class_name})"
    return PatchError(
        f"{current.path}: {current.detail}, so nrlprof cannot tell where its block ends and would delete any code "
        f"after it. Put the line '# <<< nrlprof ray-plugin-fix v{current.fix_version} <<<' back right after the "
        f"line '{apply_line}' (or delete the block by hand, or reinstall Ray), then run again."
    )


def patch_file(current: FileState, block: FixBlock, journal: list[tuple[Path, bytes]] | None = None) -> str:
    """Bring one plugin file to the current fix; returns what was done."""
    plugin, path = current.plugin, current.path
    if current.state == MISSING:
        return f"{plugin.relpath}: missing, nothing to fix [{path}]"
    if current.unterminated:
        raise _lost_end_marker(current)
    if current.state == UNRECOGNISED:
        raise PatchError(f"{path}: {current.detail}; not a plugin this version of nrlprof knows how to fix")
    if current.state == UPSTREAM_FIXED:
        return f"{plugin.relpath}: upstream-fixed (keeps the interpreter), left alone [{path}]"
    if current.state == PATCHED and current.fix_version is not None and current.fix_version > block.version:
        return f"{plugin.relpath}: patched with a newer fix (v{current.fix_version}), left alone [{path}]"
    if current.state == PATCHED and (current.fix_version, current.block_hash) == (block.version, block.digest(plugin)):
        return f"{plugin.relpath}: already patched (fix v{block.version}) [{path}]"
    if path is None:
        raise PatchError(f"{plugin.relpath}: no path")
    _write(path, build_patched(path.read_bytes(), plugin, block, path), journal)
    verb = "updated to" if current.state == PATCHED else "patched with"
    return f"{plugin.relpath}: {verb} fix v{block.version} [{path}]"


def revert_file(current: FileState, journal: list[tuple[Path, bytes]] | None = None) -> str:
    plugin, path = current.plugin, current.path
    if current.unterminated:
        raise _lost_end_marker(current)
    if current.state != PATCHED or path is None:
        return f"{plugin.relpath}: {current.state}, nothing to revert [{path}]"
    _write(path, strip_blocks(path.read_bytes()), journal)
    return f"{plugin.relpath}: reverted to Ray's original [{path}]"


DESCRIPTION = (
    "Fix Ray's nsight / rocprof-sys runtime-env plugins on disk: keep the worker's interpreter and "
    "shell-quote the profiler command. Run before `ray start` on every node."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    check_help = "change nothing; exit 0 if every plugin file present is fixed on disk, else 1 (a problem found)"
    mode.add_argument("--check", action="store_true", help=check_help)
    mode.add_argument("--revert", action="store_true", help="remove the fix and restore Ray's original files")
    parser.add_argument("--ray-dir", help="the Ray package directory (default: where `import ray` finds it)")


def run(args: argparse.Namespace) -> int:
    """Exit codes: 0 ok, 1 `--check` found an unfixed plugin, 2 could not patch / Ray not found."""
    root = find_ray_dir(args.ray_dir)
    states = [inspect_file(root, plugin) for plugin in PLUGINS]
    if root is None or all(state.state == MISSING for state in states):
        where = "no importable `ray` package" if root is None else f"no Ray runtime-env plugins under {root}"
        print(f"nrlprof patch-ray: {where}; pass --ray-dir or use the Python that runs Ray.", file=sys.stderr)
        return EXIT_FAILED
    if args.check:
        return _check(states)
    journal: list[tuple[Path, bytes]] = []
    done: list[str] = []
    try:
        if args.revert:
            done.extend(revert_file(state, journal) for state in states)
        else:
            block = load_fix_block()
            done.extend(patch_file(state, block, journal) for state in states)
    except PatchError as err:
        changed = [str(path) for path, _ in journal]
        failures = roll_back(journal)
        print(f"nrlprof patch-ray: {err}", file=sys.stderr)
        if changed and not failures:
            print(f"nrlprof patch-ray: rolled back {', '.join(changed)}; every file is as before", file=sys.stderr)
        for failure in failures:
            print(f"nrlprof patch-ray: could not roll back {failure}", file=sys.stderr)
        return EXIT_FAILED
    for line in done:
        print(line, flush=True)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point when run by path or with `python -m nrlprof.rayfix.patch_ray`."""
    parser = argparse.ArgumentParser(prog="nrlprof patch-ray", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def _check(states: list[FileState]) -> int:
    """EXIT_UNFIXED (the table's "a check that found a problem") when a plugin file present is not fixed."""
    for state in states:
        print(state.describe())
    unfixed = [state.plugin.relpath for state in states if state.state not in (*FIXED_STATES, MISSING)]
    if not unfixed:
        return EXIT_OK
    print(
        f"nrlprof patch-ray: {len(unfixed)} plugin file(s) not fixed on disk (exit {EXIT_UNFIXED}). That is fine where "
        f"the runtime-env agent loads nrlprof's fix in memory instead: {_IN_MEMORY_ROUTE}; `nrlprof doctor` tells "
        "which route each node has.",
        file=sys.stderr,
    )
    return EXIT_UNFIXED


if __name__ == "__main__":
    raise SystemExit(main())
