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
first platform only; bench/evaluate.py measures it). Each step is printed as it ends and
bench/results/multiarch.json is written after each one (a step that fails is kept, with what
it said). The suite's own multi-architecture test uses the small fixture image
(tests/integration/test_multiarch.py): the full family under emulation takes too long for every
run.

Both releases pass for both platforms on an x86 machine (2026-12-07): a container of an image of
another architecture than the engine's gets an empty /sys/devices/system/cpu, over which torch's
CPU detection no longer hangs under qemu-user (docs/using/platforms.md). Before that (2026-12-06)
the SDK's release stopped, fail-closed, at its arm64 smoke test; should it fail again, the script
stands the SDK's two built images in at its registries (pushed, and an index put at 2.13.0 as
`ci/base-image.py --index` does) so that the training image can still be built for arm64: a
benchmark's stand-in in registries that live for the run, never a release, and said so in the
table.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from bench.patch import STAGES, host_cache, keep_stages, own_registries, run_xpu, stop_registries  # noqa: E402
from xpu_release.manifest.platforms import of_names  # noqa: E402

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


OUT = ROOT / "bench" / "results" / "multiarch.json"
Step = dict[str, object]


class Run:
    """The steps of one run, printed and written to OUT as each ends."""

    def __init__(self, root: Path, regs: Path, env: dict[str, str]) -> None:
        self.root, self.regs, self.env = root, regs, env
        self.steps: dict[str, dict[str, Step]] = {}

    def step(self, ref: str, name: str, *args: str) -> bool:
        """``xpu-release ARGS`` timed; False when it failed (kept, with its last words)."""
        started = time.monotonic()
        proc = run_xpu(self.root, self.regs, self.env, *args)
        return self.keep(ref, name, started, proc.returncode, proc.stdout + proc.stderr)

    def keep(self, ref: str, name: str, started: float, code: int, said: str) -> bool:
        said_last = [line for line in said.splitlines() if line.strip()][-3:] if code else []
        step: Step = {"seconds": round(time.monotonic() - started, 1), "exit": code}
        if said_last:
            step["said"] = said_last
        if name == "release":
            keep_stages(ref, said)
        self.steps.setdefault(ref, {})[name] = step
        OUT.write_text(json.dumps({"steps": self.steps, "stages": STAGES}, indent=2) + "\n")
        outcome = "passed" if not code else f"failed (exit {code})"
        print(f"{ref}: {name} {outcome} in {step['seconds']} s", flush=True)
        for line in said_last:
            print(f"    {line[:300]}", flush=True)
        return code == 0

    def stand_in(self, ref: str) -> None:
        """``ref``'s built images pushed to the public registry with an index at its version,
        for a child's lock: a stand-in for a release that could not pass here (no smoke test)."""
        started = time.monotonic()
        image, version = ref.split(":")
        public = yaml.safe_load(self.regs.read_text())["registries"]["public"]["host"]
        members = []
        for platform in of_names(PLATFORMS):
            remote = f"{public}/bench/{image}:{version}-{platform.architecture}"
            tag = ["docker", "tag", platform.local_ref(ref), remote]
            for argv in (tag, ["docker", "push", "-q", remote]):
                subprocess.run(argv, check=True, capture_output=True, env=self.env)
            members.append(remote)
        spec = importlib.util.spec_from_file_location("base_image", ROOT / "ci" / "base-image.py")
        assert spec is not None
        assert spec.loader is not None
        base_image = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base_image)
        base_image.index(f"{public}/bench/{image}:{version}", members)
        self.keep(ref, "stand-in (pushed, not released)", started, 0, "")


def main() -> None:
    if not os.environ.get("XPU_STACK_DIR"):
        sys.exit('the local stack: run `ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"` first')
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        sys.exit("no binfmt handler for aarch64: `ci/local-stack.sh up` registers qemu-user-static's")
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
        try:
            run = Run(root, own_registries(tmp), {**os.environ, "XPU_RELEASE_CACHE": str(cache)})
            for ref in (SDK, CPU):
                if not run.step(ref, "lock", "lock", ref):
                    break
                built = all([run.step(ref, f"build {p}", "build", ref, "--no-cache", "--platform", p)
                             for p in PLATFORMS])  # fmt: skip
                if not built:
                    break
                if not run.step(ref, "release", "release", ref, *SKIP) and ref == SDK:
                    run.stand_in(ref)
        finally:
            stop_registries()
    table(run.steps)


def table(steps: dict[str, dict[str, Step]]) -> None:
    print("\nthe CPU family for linux/amd64 and linux/arm64 (arm64 under emulation), seconds\n")
    for ref, done in steps.items():
        for name, step in done.items():
            outcome = "" if not step["exit"] else f"failed (exit {step['exit']})"
            print(f"  {ref:<28} {name:<34} {step['seconds']:8.1f}  {outcome}")
        for stage, seconds in STAGES.get(ref, {}).items():
            print(f"      release stage {stage:<16} {seconds:8.1f}")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
