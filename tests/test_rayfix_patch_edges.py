"""`nrlprof patch-ray` edge cases: half-patched rollbacks, look-alike upstream fixes, lost markers, stale bytecode."""

from __future__ import annotations

import importlib.util
import py_compile
from pathlib import Path

import pytest
from helpers.ray_patch import BUGGY_LINES, NSIGHT, ROCPROF, load_module, rewrite

from nrlprof.rayfix import patch_ray
from nrlprof.rayfix.fix import NRLPROF_FIX_VERSION as FIX

RAY_NSIGHT_LINE = BUGGY_LINES[NSIGHT]
END_MARKER = f"# <<< nrlprof ray-plugin-fix v{FIX} <<<\n".encode()


def test_failure_on_the_second_file_rolls_back_the_first(ray_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nsight, rocprof = ray_dir / NSIGHT, ray_dir / ROCPROF
    # A name of the fix at the top of Ray's rocprof module: patching nsight.py succeeds, rocprof_sys.py is refused.
    rocprof.write_text(rocprof.read_text() + "\nrender_tool_options = None\n")
    originals = {nsight: nsight.read_bytes(), rocprof: rocprof.read_bytes()}

    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 2

    err = capsys.readouterr().err
    assert "would rebind render_tool_options" in err
    assert f"rolled back {nsight}" in err
    assert {path: path.read_bytes() for path in originals} == originals
    assert patch_ray.inspect_ray(ray_dir)["nsight"]["state"] == "unpatched"


def test_unquoted_join_that_keeps_the_interpreter_is_not_upstream_fixed(ray_dir: Path) -> None:
    nsight = ray_dir / NSIGHT
    rewrite(nsight, RAY_NSIGHT_LINE, 'context.py_executable = " ".join(self.nsight_cmd) + f" {context.py_executable}"')
    assert patch_ray.inspect_ray(ray_dir)["nsight"]["state"] == "unpatched"
    assert patch_ray.main(["--check", "--ray-dir", str(ray_dir)]) == 1

    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0

    assert patch_ray.inspect_ray(ray_dir)["nsight"]["state"] == "patched"
    assert load_module(nsight).NsightPlugin.nrlprof_fix_version == FIX


@pytest.mark.parametrize(
    ("line", "state"),
    [
        ('context.py_executable = " ".join(shlex.quote(a) for a in self.nsight_cmd) + " " + context.py_executable', 2),
        ("context.py_executable = shlex.join(self.nsight_cmd)", 1),
        ('context.py_executable = shlex.join(self.nsight_cmd) + " " + " ".join([context.py_executable])', 1),
    ],
)
def test_upstream_fixed_needs_both_the_interpreter_and_quoting(ray_dir: Path, line: str, state: int) -> None:
    rewrite(ray_dir / NSIGHT, RAY_NSIGHT_LINE, line)
    expected = {2: "upstream-fixed", 1: "unpatched"}[state]
    assert patch_ray.inspect_ray(ray_dir)["nsight"]["state"] == expected


def test_revert_after_the_end_marker_was_deleted_keeps_later_code(
    ray_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nsight = ray_dir / NSIGHT
    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    damaged = nsight.read_bytes().replace(END_MARKER, b"") + b"\nSITE_CUSTOMISATION = 'keep me'\n"
    nsight.write_bytes(damaged)

    assert patch_ray.main(["--revert", "--ray-dir", str(ray_dir)]) == 2
    err = capsys.readouterr().err
    assert str(nsight) in err and "lost its end marker" in err
    assert f"'# <<< nrlprof ray-plugin-fix v{FIX} <<<'" in err and "apply_nsight_fix(NsightPlugin)" in err
    assert nsight.read_bytes() == damaged

    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 2
    assert "lost its end marker" in capsys.readouterr().err
    assert nsight.read_bytes() == damaged
    assert patch_ray.main(["--check", "--ray-dir", str(ray_dir)]) == 1
    assert patch_ray.inspect_ray(ray_dir)["nsight"]["state"] == "unrecognised"


def test_stale_unchecked_hash_bytecode_does_not_keep_the_old_class(ray_dir: Path) -> None:
    nsight = ray_dir / NSIGHT
    cached = Path(importlib.util.cache_from_source(str(nsight)))
    py_compile.compile(str(nsight), cfile=str(cached), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert not hasattr(load_module(nsight).NsightPlugin, "nrlprof_fix_version")

    assert patch_ray.main(["--ray-dir", str(ray_dir)]) == 0
    assert load_module(nsight).NsightPlugin.nrlprof_fix_version == FIX

    py_compile.compile(str(nsight), cfile=str(cached), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert patch_ray.main(["--revert", "--ray-dir", str(ray_dir)]) == 0
    assert not hasattr(load_module(nsight).NsightPlugin, "nrlprof_fix_version")
    assert patch_ray.stale_bytecode(ray_dir / ROCPROF) == []
