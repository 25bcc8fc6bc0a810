"""Build the fake CUDA runtime and NVTX injection library once per source version, safely under concurrency."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = {"libcudart.so": HERE / "fake_cudart.c", "libnvtx_standin_injection.so": HERE / "fake_nvtx_injection.c"}
CUDART_ALIASES = ("libcudart.so.12", "libcudart.so.13")


def cache_root() -> Path:
    configured = os.environ.get("NRLPROF_STANDIN_CACHE")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"nrlprof-nsys-standin-{os.getuid()}"


def _source_key() -> str:
    digest = hashlib.sha256()
    for name, source in sorted(SOURCES.items()):
        digest.update(name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def library_dir() -> Path:
    """The directory holding libcudart.so(.12/.13) and the NVTX injection library, built on first use."""
    target = cache_root() / _source_key()
    if (target / "libcudart.so").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        for name, source in SOURCES.items():
            compiler = os.environ.get("CC", "cc")
            command = [compiler, "-shared", "-fPIC", "-O2", "-o", str(staging / name), str(source), "-lpthread"]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise RuntimeError(f"nsys stand-in: building {source.name} failed:\n{result.stderr}")
        for alias in CUDART_ALIASES:
            (staging / alias).symlink_to("libcudart.so")
        try:
            staging.rename(target)
        except OSError:
            if not (target / "libcudart.so").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
