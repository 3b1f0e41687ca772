"""A GitLab runner for the pipeline tests: gitlab-ci-local (pinned; ci/test.sh installs it from
the npm registry) and a checkout as a runner sees it. Shared by the engine-free fan-out tests
(tests/unit/cli/test_ci_platforms.py) and the stack's (tests/integration/test_pipelines.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .needs import ROOT, missing

GCL = ROOT / ".cache" / "gitlab-ci-local" / "node_modules" / ".bin" / "gitlab-ci-local"


def gitlab_ci_local() -> Path:
    """gitlab-ci-local, or the test fails in CI (skips elsewhere) saying what installs it."""
    if not GCL.is_file():
        missing(f"gitlab-ci-local is not installed at {GCL}: ci/test.sh installs it")
    return GCL


def as_checkout(dst: Path) -> Path:
    """``dst`` committed as a git clone of a GitLab project: gitlab-ci-local reads the jobs'
    files from the commit and derives CI_PROJECT_* from the remote."""
    git = ["git", "-C", str(dst), "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fixture"], check=True)
    # assumed: a GitLab project's address
    subprocess.run([*git, "remote", "add", "origin", "https://gitlab.example.invalid/xpu/xpu-release.git"],
                   check=True)  # fmt: skip
    return dst
