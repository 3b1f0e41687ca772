"""xpu-bench (image/workloads/xpu_bench.py), the workload the CPU images carry, as far as it runs
without PyTorch: it says in one JSON line on stdout which switch this image cannot honour (exit
0), refuses sizes it cannot run (exit 2, nothing on stdout), and names itself by the sha256 of
its own file. Its training loop runs in the images (tests/integration/test_evaluate.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from xpu_release.image.workload import WORKLOADS

BENCH = WORKLOADS["xpu-bench"]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # PATH without a compiler, and no accelerate: the environment of an image that has neither.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_BENCH_", "CHECKPOINT_"))}
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=60,
                          env={**clean, "PATH": "/nonexistent", **env}, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("switch", "why"),
    [("XPU_BENCH_COMPILE", "C++ compiler"), ("XPU_BENCH_ACCELERATE", "accelerate library")],
)
def test_a_switch_the_image_cannot_honour_is_said_not_failed(switch: str, why: str) -> None:
    done = run("--steps", "3", **{switch: "true"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert why in line["unsupported"]
    assert line["workload"] == "xpu-bench"
    assert line["sha256"] == hashlib.sha256(BENCH.read_bytes()).hexdigest()
    assert "tokens_per_second" not in line


@pytest.mark.parametrize("args", [["--steps", "0"], ["--dim", "130", "--heads", "4"], ["--batch", "x"]])
def test_sizes_it_cannot_run_exit_non_zero_with_nothing_on_stdout(args: list[str]) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert done.stdout == ""


def test_the_workload_is_a_script_that_imports_nothing_of_xpu_release() -> None:
    text = BENCH.read_text()
    assert text.startswith("#!/usr/bin/env python3\n")
    assert "xpu_release" not in text
