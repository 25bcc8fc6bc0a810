"""The README's quick start on one machine, as a newcomer runs it: a fresh venv with nrlprof installed from its
wheel, a local job that starts and stops its own Ray cluster, then the README's commands exactly as it prints
them (`uv run train.py` run as `python train.py`), each with exit code 0."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from helpers.environment import environment_without

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.build, pytest.mark.fresh_cluster]  # the README's job starts its own cluster


def quick_start_lines() -> list[str]:
    """The commands of the README's first quick-start block, comments dropped."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\n.*?```bash\n(.*?)```", text, re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line]


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A venv with nrlprof from its wheel; its dependencies are this environment's (nrlprof itself left out)."""
    root = tmp_path_factory.mktemp("newcomer")
    wheels = root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, timeout=600)  # fmt: skip
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())  # fmt: skip
    (site / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = wheels.glob("nrlprof-*.whl")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   timeout=300)  # fmt: skip
    return venv


@pytest.fixture
def short_ray_tmpdir():
    """A Ray temp dir with a short path: Ray's socket paths under it must stay within AF_UNIX's 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="nrq-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_quick_start_on_one_machine_is_true(fresh_venv, tmp_path, short_ray_tmpdir):
    job = tmp_path / "job"
    job.mkdir()
    shutil.copyfile(ROOT / "tests" / "programs" / "quick_start_train.py", job / "train.py")
    env = environment_without("NRL_", "NRLPROF_", "RAY_", "PYTHONPATH")
    env.update(PATH=f"{fresh_venv / 'bin'}:{env['PATH']}", RAY_TMPDIR=str(short_ray_tmpdir))
    lines = quick_start_lines()
    assert "uv run train.py" in lines
    script = "\n".join("python train.py" if line == "uv run train.py" else line for line in lines)
    result = subprocess.run(["bash", "-ec", script], cwd=job, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    assert "Torch profiling enabled for worker 'dtensor_policy_worker' (matched pattern '*policy*')" in result.stderr
    assert (job / "timeline.json.gz").is_file() and (job / "report.html").is_file()
    summary = subprocess.run(["nrlprof", "summary", "profiles/", "--json"], cwd=job, env=env, capture_output=True,
                             text=True, timeout=300)  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    data = json.loads(summary.stdout)
    assert data["steps"] == [3, 4]
    assert sorted((w["worker"], w["rank"]) for w in data["workers"]) == [
        ("controller", None),
        ("dtensor_policy_worker", 0),
        ("dtensor_policy_worker", 1),
    ]
    assert data["skipped"] == []
