"""Fix Ray's nsight and rocprof-sys runtime-env plugins on disk (`nrlprof patch-ray`).

Ray's plugins drop the interpreter chosen by earlier plugins and do not quote the
profiler command.  The plugins run in the runtime-env agent, which a patch in the
driver's memory does not reach, so this appends the fixed methods (the source of
`fix.py`, beside this file) to the installed plugin modules, between
two marker lines.  `--revert` removes that block and restores the original bytes.

Standard library only: SLURM scripts run it by path on nodes where nrlprof is not
installed (`python nrlprof/rayfix/patch_ray.py [--check|--revert] [--ray-dir DIR]`).
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
import importlib.util
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

FIX_SOURCE = Path(__file__).with_name("fix.py")

PATCHED = "patched"
UNPATCHED = "unpatched"
UPSTREAM_FIXED = "upstream-fixed"
MISSING = "missing"
UNRECOGNISED = "unrecognised"
FIXED_STATES = (PATCHED, UPSTREAM_FIXED)

EXIT_OK = 0
EXIT_UNFIXED = 1
EXIT_FAILED = 2

_BEGIN = re.compile(rb"\n# >>> nrlprof ray-plugin-fix v(\d+) ([0-9a-f]{12}) >>>[^\n]*\n")
_END = re.compile(rb"# <<< nrlprof ray-plugin-fix v\d+ <<<\n")
_IN_MEMORY_ROUTE = (
    'set RAY_RUNTIME_ENV_PLUGINS=\'[{"class": "nrlprof.rayfix.agent_hook.AgentHook"}]\' '
    "before `ray start` on every node "
    "(nrlprof sets it itself for clusters that the driver starts)"
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


class PatchError(Exception):
    """A plugin file could not be patched or reverted; the message says why and what to do."""


@dataclass(frozen=True)
class FileState:
    plugin: Plugin
    path: Path | None
    state: str
    fix_version: int | None = None
    block_hash: str | None = None
    detail: str = ""

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
    if blocks:
        begin = blocks[-1][2]
        return FileState(plugin, path, PATCHED, int(begin.group(1)), begin.group(2).decode())
    state, detail = _classify(data, plugin)
    return FileState(plugin, path, state, detail=detail)


def _find_blocks(data: bytes) -> list[tuple[int, int, re.Match[bytes]]]:
    """(start, end, begin marker) of each nrlprof block; a block without its end marker runs to the end of file."""
    blocks = []
    position = 0
    while (begin := _BEGIN.search(data, position)) is not None:
        end = _END.search(data, begin.end())
        stop = end.end() if end is not None else len(data)
        blocks.append((begin.start(), stop, begin))
        position = stop
    return blocks


def strip_blocks(data: bytes) -> bytes:
    """The file as it was before `patch-ray` appended to it."""
    kept = []
    position = 0
    for start, stop, _ in _find_blocks(data):
        kept.append(data[position:start])
        position = stop
    kept.append(data[position:])
    return b"".join(kept)


def _classify(data: bytes, plugin: Plugin) -> tuple[str, str]:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError) as err:
        return UNRECOGNISED, f"does not parse ({err})"
    methods = _class_methods(tree, plugin.class_name)
    if methods is None:
        return UNRECOGNISED, f"no class {plugin.class_name}"
    if "create" not in methods or "modify_context" not in methods:
        return UNRECOGNISED, f"{plugin.class_name} has no create/modify_context"
    assignments = [
        node.value
        for node in ast.walk(methods["modify_context"])
        if isinstance(node, ast.Assign) and any(_is_py_executable(target) for target in node.targets)
    ]
    if assignments and all(_reads_py_executable(value) for value in assignments):
        return UPSTREAM_FIXED, "keeps context.py_executable"
    return UNPATCHED, ""


def _class_methods(tree: ast.Module, class_name: str) -> dict[str, ast.AST] | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            functions = (ast.FunctionDef, ast.AsyncFunctionDef)
            return {item.name: item for item in node.body if isinstance(item, functions)}
    return None


def _is_py_executable(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "py_executable"


def _reads_py_executable(value: ast.AST) -> bool:
    return any(_is_py_executable(node) for node in ast.walk(value))


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


def _write(path: Path, data: bytes) -> None:
    try:
        atomic_write(path, data)
    except OSError as err:
        raise PatchError(
            f"cannot write {path} ({err.strerror or err}). Run `nrlprof patch-ray` as a user who can write to "
            f"Ray's installation (or in the image build), or use the in-memory route instead: {_IN_MEMORY_ROUTE}."
        ) from None


def patch_file(current: FileState, block: FixBlock) -> str:
    """Bring one plugin file to the current fix; returns what was done."""
    plugin, path = current.plugin, current.path
    if current.state == MISSING:
        return f"{plugin.relpath}: missing, nothing to fix [{path}]"
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
    _write(path, build_patched(path.read_bytes(), plugin, block, path))
    verb = "updated to" if current.state == PATCHED else "patched with"
    return f"{plugin.relpath}: {verb} fix v{block.version} [{path}]"


def revert_file(current: FileState) -> str:
    plugin, path = current.plugin, current.path
    if current.state != PATCHED or path is None:
        return f"{plugin.relpath}: {current.state}, nothing to revert [{path}]"
    _write(path, strip_blocks(path.read_bytes()))
    return f"{plugin.relpath}: reverted to Ray's original [{path}]"


DESCRIPTION = (
    "Fix Ray's nsight / rocprof-sys runtime-env plugins on disk: keep the worker's interpreter and "
    "shell-quote the profiler command. Run before `ray start` on every node."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    check_help = "change nothing; exit 0 if every plugin file present is fixed, else 1"
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
    try:
        if args.revert:
            for state in states:
                print(revert_file(state), flush=True)
        else:
            block = load_fix_block()
            for state in states:
                print(patch_file(state, block), flush=True)
    except PatchError as err:
        print(f"nrlprof patch-ray: {err}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point when run by path or with `python -m nrlprof.rayfix.patch_ray`."""
    parser = argparse.ArgumentParser(prog="nrlprof patch-ray", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def _check(states: list[FileState]) -> int:
    for state in states:
        print(state.describe())
    return EXIT_OK if all(state.state in (*FIXED_STATES, MISSING) for state in states) else EXIT_UNFIXED


if __name__ == "__main__":
    raise SystemExit(main())
