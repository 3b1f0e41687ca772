"""ci/local-stack.sh: idempotent, and what it prints for eval is what the suite runs on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "local-stack.sh"


def stack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_a_second_up_starts_nothing() -> None:
    result = stack("up")

    assert result.returncode == 0, result.stderr
    assert "starting" not in result.stderr
    assert "debootstrap" not in result.stderr
    assert "seeding" not in result.stderr


def test_status_names_every_part_and_all_are_up() -> None:
    result = stack("status")

    assert result.returncode == 0, result.stdout
    names = [
        line.split()[2] if line.startswith("registry") else line.split()[0]
        for line in result.stdout.splitlines()
    ]
    assert names[:6] == ["engine", "hub", "public", "vpc-cn-beijing", "vpc-cn-wulanchabu", "vpc-cn-shanghai"]
    assert names[6:] in ([], ["lazy"])  # lazy pulling, once a test or a person started it (`lazy`)


def test_env_prints_what_the_suite_runs_on() -> None:
    result = stack("env")

    exported = dict(line.removeprefix("export ").split("=", 1) for line in result.stdout.splitlines())
    assert exported["XPU_RELEASE_REGISTRIES"] == os.environ["XPU_RELEASE_REGISTRIES"]
    assert exported["DOCKER_HOST"] == os.environ["DOCKER_HOST"]
    assert "PASSWORD=" not in result.stdout  # a path to the password file, never the password
    password = Path(exported["XPU_STACK_PUBLIC_PASSWORD_FILE"]).read_text().strip()
    assert password not in result.stdout
    assert oct(Path(exported["XPU_STACK_PUBLIC_PASSWORD_FILE"]).stat().st_mode & 0o777) == "0o600"
