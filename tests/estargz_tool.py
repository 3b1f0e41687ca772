"""The stargz snapshotter's own reader, as a command: ``tests/tools/estargz-check/main.go`` built
against Debian's ``golang-github-containerd-stargz-snapshotter-dev`` with Debian's Go, offline
(GOPATH mode, no module proxy), once, into the repository's ``.cache/tools``."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .needs import ROOT, missing

SOURCE = ROOT / "tests" / "tools" / "estargz-check" / "main.go"
GOCODE = Path("/usr/share/gocode")
PACKAGE = GOCODE / "src" / "github.com" / "containerd" / "stargz-snapshotter" / "estargz"
INSTALL = "apt-get install golang-go golang-github-containerd-stargz-snapshotter-dev (ci/test.sh does)"


def estargz_check() -> Path:
    """The built checker (built again when its source changed)."""
    go = shutil.which("go")
    if go is None or not PACKAGE.is_dir():
        missing(f"Go and the snapshotter's estargz package are not installed: {INSTALL}")
    out = ROOT / ".cache" / "tools" / "estargz-check"
    if out.is_file() and out.stat().st_mtime >= SOURCE.stat().st_mtime:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="estargz-check-") as tmp:
        src = Path(tmp) / "src" / "estargzcheck"
        src.mkdir(parents=True)
        shutil.copy(SOURCE, src / "main.go")
        env = {**os.environ, "GO111MODULE": "off", "GOPATH": f"{tmp}:{GOCODE}", "GOPROXY": "off",
               "GOFLAGS": "", "GOCACHE": str(ROOT / ".cache" / "go-build")}  # fmt: skip
        built = subprocess.run(
            [go, "build", "-o", str(out) + ".new", "."], cwd=src, env=env, capture_output=True, text=True,
            check=False, timeout=600,
        )  # fmt: skip
        if built.returncode != 0:
            msg = f"estargz-check does not build:\n{built.stderr}"
            raise AssertionError(msg)
        Path(str(out) + ".new").replace(out)
    return out


def check(blob: Path, toc_digest: str) -> subprocess.CompletedProcess[str]:
    """The snapshotter's reader over ``blob``: exit 0 when it accepts every file of it."""
    return subprocess.run(
        [str(estargz_check()), str(blob), toc_digest],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
