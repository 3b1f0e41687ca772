"""What the package index offers: whether a version of a distribution can be installed by the
images (a binary wheel for their Python), asked of pip itself with the manifest's index and
find-links, as ``lock`` resolves. ``patch`` asks before it bumps a pin to the version an
advisory names, so that a fix the index does not have is said, never written into a manifest
whose lock cannot be made; and, when the index has none of the versions the advisories name,
which versions it has (a later one that no advisory affects fixes them too)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import LockError
from ..guard.shown import shown
from ..manifest import ImageSpec
from .lockfile import TARGET_PYTHON


def _index_options(spec: ImageSpec) -> list[str]:
    """Where ``spec``'s lock resolves (its index, its find-links), for binary wheels of the
    images' Python."""
    cmd = ["--only-binary=:all:", "--python-version", TARGET_PYTHON, "--disable-pip-version-check",
           "--retries", "2", "--timeout", "30"]  # fmt: skip
    if spec.pip_index_url:
        cmd += ["--index-url", spec.pip_index_url]
    for link in spec.pip_find_links:
        cmd += ["--find-links", link]
    return cmd


def _unanswered(spec: ImageSpec, proc: subprocess.CompletedProcess[str], what: str) -> LockError | None:
    """The error of an index that did not answer (None: it answered that it has no such thing)."""
    if any(sign in proc.stderr for sign in _UNREACHABLE) or "No matching distribution" not in proc.stderr:
        said = next((line for line in proc.stderr.splitlines() if line.startswith("ERROR")), "")
        said = shown(said, 200) if said else "no answer"
        msg = (
            f"cannot ask the package index {what} (pip: {said}); run where "
            f"{spec.pip_index_url or 'the index'} answers"
        )
        return LockError(msg)
    return None


def offers(spec: ImageSpec, name: str, version: str) -> bool:
    """True when pip, pointed where ``spec``'s lock resolves, finds ``name==version`` as a
    binary wheel for the images' Python (its dependencies are not asked)."""
    with tempfile.TemporaryDirectory(prefix="xpu-index-") as tmp:
        cmd = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
            "--progress-bar", "off", *_index_options(spec),
            "--target", str(Path(tmp) / "unused"), "--report", str(Path(tmp) / "report.json"),
            f"{name}=={version}",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return True
    error = _unanswered(spec, proc, f"whether {name} {version} is there")
    if error is not None:
        raise error
    return False


def versions(spec: ImageSpec, name: str) -> tuple[str, ...]:
    """Every version of ``name`` the index offers as a binary wheel for the images' Python, no
    pre-release (``pip index versions``): where ``patch`` looks when the fix an advisory names is
    not on the index, for the smallest later version that no advisory affects."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", *_index_options(spec), name]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        error = _unanswered(spec, proc, f"which versions of {name} it has")
        if error is not None:
            raise error
        return ()
    listed = next((line for line in proc.stdout.splitlines() if line.startswith("Available versions:")), "")
    return tuple(v.strip() for v in listed.partition(":")[2].split(",") if v.strip())


# What pip says when the index did not answer (it then also finds "no matching distribution").
_UNREACHABLE = ("NewConnectionError", "Could not fetch URL", "ConnectTimeoutError", "ReadTimeoutError",
                "Max retries exceeded")  # fmt: skip
