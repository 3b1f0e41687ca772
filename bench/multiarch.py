"""The CPU family for linux/amd64 and linux/arm64 (issue #43; a script, not a timed test), on the
local stack: what a release of both platforms costs, the arm64 image built and smoke-tested under
qemu-user-static's emulation as this machine has no arm64 core.

    ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"
    python bench/multiarch.py

In a temporary copy of this repository, with registries of its own (four of Debian's
`docker-registry` on free loopback ports) and a cache of its own (the download cache warm:
wheels are content-addressed), pytorch-cpu-sdk:2.13.0 and training-cpu-pytorch:25.03 are made to
declare `platforms: [linux/amd64, linux/arm64]` (torch is 2.13.0 on arm64: PyPI's aarch64 wheel
has no +cpu), then, parents first, each is locked, built for each platform with --no-cache (timed
apart), and released (smoke tests of both platforms, the gate on both SBOMs, one index published
to every endpoint, verify). Both releases run with --no-evaluate (the evaluation measures the
first platform only; bench/evaluate.py measures it). Prints a table and writes
bench/results/multiarch.json. The suite's own multi-architecture test uses the small fixture
image (tests/integration/test_multiarch.py): the full family under emulation takes too long for
every run.

On an x86 machine it stops at the SDK's arm64 smoke test (2026-12-06): torch's aarch64 wheel
crashes on import under qemu-user (oneDNN's xbyak_aarch64 finds no midr_el1 in sysfs), so the
release fails closed, as it must; the family's arm64 image needs an arm64 runner.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.patch import STAGES, host_cache, own_registries, stop_registries, xpu  # noqa: E402

SDK, CPU = "pytorch-cpu-sdk:2.13.0", "training-cpu-pytorch:25.03"
SKIP = ("--no-evaluate", "bench/multiarch.py measures releases without the evaluation")
PLATFORMS = ("linux/amd64", "linux/arm64")
TORCH_ARM64 = "platform_versions: {linux/arm64: 2.13.0}"


def both_platforms(root: Path) -> None:
    """The family's two manifests, in the copy, for both platforms."""
    for ref in (SDK, CPU):
        image, version = ref.split(":")
        path = root / "manifests" / image / f"{version}.yaml"
        text = path.read_text()
        assert "\nplatforms:" not in text
        assert text.count("    version: 2.13.0+cpu\n") == 1
        text = text.replace("\ncomponents:\n", f"\nplatforms: [{', '.join(PLATFORMS)}]\n\ncomponents:\n")
        text = text.replace("    version: 2.13.0+cpu\n", f"    version: 2.13.0+cpu\n    {TORCH_ARM64}\n")
        path.write_text(text)


def one_image(root: Path, regs: Path, env: dict[str, str], ref: str) -> dict[str, float]:
    times = {"lock": xpu(root, regs, env, "lock", ref)}
    for platform in PLATFORMS:
        times[f"build {platform}"] = xpu(root, regs, env, "build", ref, "--no-cache", "--platform", platform)
    times["release"] = xpu(root, regs, env, "release", ref, *SKIP, stages=ref)
    return times


def main() -> None:
    if not os.environ.get("XPU_STACK_DIR"):
        sys.exit('the local stack: run `ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"` first')
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        sys.exit("no binfmt handler for aarch64: `ci/local-stack.sh up` registers qemu-user-static's")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="xpu-bench-multiarch-") as name:
        tmp = Path(name)
        root = tmp / "repo"
        for folder in ("manifests", "images", "templates", "schema"):
            shutil.copytree(ROOT / folder, root / folder)
        shutil.copy(ROOT / "registries.yaml", root / "registries.yaml")
        both_platforms(root)
        cache = tmp / "cache"
        cache.mkdir()
        if (host_cache() / "blobs").is_dir():
            shutil.copytree(host_cache() / "blobs", cache / "blobs")
        env = {**os.environ, "XPU_RELEASE_CACHE": str(cache)}
        try:
            regs = own_registries(tmp)
            for ref in (SDK, CPU):
                results[ref] = one_image(root, regs, env, ref)
                print(f"{ref}: " + ", ".join(f"{k} {v:.1f} s" for k, v in results[ref].items()), flush=True)
        finally:
            stop_registries()
    print("\nthe CPU family for linux/amd64 and linux/arm64 (arm64 under emulation), seconds\n")
    for ref, times in results.items():
        for step, seconds in times.items():
            print(f"  {ref:<28} {step:<22} {seconds:8.1f}")
        print(f"  {ref:<28} {'in all':<22} {sum(times.values()):8.1f}")
        for stage, seconds in STAGES.get(ref, {}).items():
            print(f"      release stage {stage:<16} {seconds:8.1f}")
    out = ROOT / "bench" / "results" / "multiarch.json"
    out.write_text(json.dumps({"results": results, "stages": STAGES}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
