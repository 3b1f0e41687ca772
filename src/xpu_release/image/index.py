"""What the package index offers: whether a version of a distribution can be installed by the
images (a binary wheel for their Python), asked of pip itself with the manifest's index and
find-links, as ``lock`` resolves. ``patch`` asks before it bumps a pin to the version an
advisory names, so that a fix the index does not have is said, never written into a manifest
whose lock cannot be made."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import LockError
from ..manifest import ImageSpec
from .lockfile import TARGET_PYTHON


def offers(spec: ImageSpec, name: str, version: str) -> bool:
    """True when pip, pointed where ``spec``'s lock resolves, finds ``name==version`` as a
    binary wheel for the images' Python (its dependencies are not asked)."""
    with tempfile.TemporaryDirectory(prefix="xpu-index-") as tmp:
        cmd = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
            "--only-binary=:all:", "--python-version", TARGET_PYTHON, "--disable-pip-version-check",
            "--progress-bar", "off", "--retries", "2", "--timeout", "30",
            "--target", str(Path(tmp) / "unused"), "--report", str(Path(tmp) / "report.json"),
            f"{name}=={version}",
        ]  # fmt: skip
        if spec.pip_index_url:
            cmd += ["--index-url", spec.pip_index_url]
        for link in spec.pip_find_links:
            cmd += ["--find-links", link]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return True
    if any(sign in proc.stderr for sign in _UNREACHABLE) or "No matching distribution" not in proc.stderr:
        said = next((line for line in proc.stderr.splitlines() if line.startswith("ERROR")), "")
        msg = (
            f"cannot ask the package index whether {name} {version} is there (pip: "
            f"{said[:200] or 'no answer'}); run where {spec.pip_index_url or 'the index'} answers"
        )
        raise LockError(msg)
    return False


# What pip says when the index did not answer (it then also finds "no matching distribution").
_UNREACHABLE = ("NewConnectionError", "Could not fetch URL", "ConnectTimeoutError", "ReadTimeoutError",
                "Max retries exceeded")  # fmt: skip
