"""A patch release against a cold release (issue #39; a script, not a timed test), on the local
stack: the time from a new advisory to the verified publish of the patch that fixes it, beside
the time of a cold release of the image it patches.

    ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"
    python bench/patch.py [--repeat 3]

In a temporary copy of this repository, against a namespace of its own on the local stack:
  setup  the SDK (pytorch-cpu-sdk:2.13.0) released there (not measured);
  cold   training-cpu-pytorch:25.03 built with --no-cache (the engine's layer cache unused; the
         SDK base and the host's wheel cache warm), then released: test, scan, publish, verify,
         notes, record;
  patch  an advisory against its accelerate (high, fixed in 1.6.0) is added; then `watch` (finds
         it), `patch` (the next patch's manifest, lock and Dockerfile) and `release` of the patch
         (a one-pin rebuild, its smoke test, scan, publish of the new layers, verify).
Both releases run with --no-evaluate (the evaluation costs both the same; bench/evaluate.py
measures it). Goal: the patch under 20 % of the cold release. Each round uses a fresh copy and
namespace; median of --repeat. Prints a table and writes bench/results/patch.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.20
SDK, CPU = "pytorch-cpu-sdk:2.13.0", "training-cpu-pytorch:25.03"
SKIP = ("--no-evaluate", "bench/patch.py compares releases without the evaluation")
HIGH = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"


def xpu(root: Path, regs: Path, *args: str) -> float:
    started = time.monotonic()
    argv = [sys.executable, "-m", "xpu_release", "--root", str(root), "--registries", str(regs), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 15):  # 15: watch says a patch is due
        sys.exit(f"xpu-release {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return time.monotonic() - started


def one_round(tmp: Path) -> dict[str, float]:
    root = tmp / "repo"
    for name in ("manifests", "images", "templates", "schema"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy(ROOT / "registries.yaml", root / "registries.yaml")
    stack = os.environ["XPU_STACK_DIR"]
    ns = "bp" + uuid.uuid4().hex[:10]
    regs = tmp / "regs.yaml"
    regs.write_text(
        "registries:\n"
        f"  public: {{host: '127.0.0.1:15001', namespace: {ns}, ca_file: {stack}/certs/ca.crt}}\n"
        f"  vpc:\n    namespace: {ns}\n    insecure: true\n"
        "    regions: [cn-beijing, cn-wulanchabu, cn-shanghai]\n"
        "    hosts: {cn-beijing: '127.0.0.1:15002', cn-wulanchabu: '127.0.0.1:15003',\n"
        "            cn-shanghai: '127.0.0.1:15004'}\n"
        "  hub: {host: '127.0.0.1:15000', namespace: base, insecure: true}\n"
    )
    osv = tmp / "osv"
    osv.mkdir()
    for ref in (SDK, CPU):  # a stack whose debootstrap met other Debian versions: re-pinned here
        xpu(root, regs, "lock", ref)
    xpu(root, regs, "release", SDK, "--no-scan", "bench setup", *SKIP)
    cold_build = xpu(root, regs, "build", CPU, "--no-cache")
    cold_release = xpu(root, regs, "release", CPU, "--advisories", str(osv), *SKIP)
    when = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = {"schema_version": "1.6.0", "id": "BENCH-PATCH-1", "aliases": ["CVE-2099-0401"],
              "modified": when, "published": when, "severity": [{"type": "CVSS_V3", "score": HIGH}],
              "affected": [{"package": {"ecosystem": "PyPI", "name": "accelerate"}, "ranges": [
                  {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.6.0"}]}]}]}  # fmt: skip
    (osv / "accelerate.json").write_text(json.dumps(record))
    watch = xpu(root, regs, "watch", CPU, "--advisories", str(osv))
    patch = xpu(root, regs, "patch", CPU, "--advisories", str(osv))
    release = xpu(root, regs, "release", "training-cpu-pytorch:25.03.1", "--advisories", str(osv), *SKIP)
    return {"cold_build": cold_build, "cold_release": cold_release, "cold": cold_build + cold_release,
            "watch": watch, "patch": patch, "patch_release": release,
            "patched": watch + patch + release}  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("XPU_STACK_DIR"):
        sys.exit('the local stack: run `ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"` first')
    rounds = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="xpu-bench-patch-") as tmp:
            rounds.append(one_round(Path(tmp)))
    median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    ratio = median["patched"] / median["cold"]
    rows = [
        ("cold: build --no-cache", median["cold_build"]),
        ("cold: release (test, scan, publish, verify, notes, record)", median["cold_release"]),
        ("cold release, in all", median["cold"]),
        ("patch: watch (finds the advisory)", median["watch"]),
        ("patch: patch (manifest, lock, Dockerfile)", median["patch"]),
        (
            "patch: release of the patch (one-pin rebuild, test, scan, publish, verify)",
            median["patch_release"],
        ),
        ("patch, from advisory to verified publish", median["patched"]),
    ]
    print(f"\na patch release against a cold release, median of {args.repeat}\n")
    for name, seconds in rows:
        print(f"  {name:<78} {seconds:7.1f} s")
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"\n  patch / cold = {ratio:.2f} (goal <= {GOAL:.2f}: {verdict})")
    out = ROOT / "bench" / "results" / "patch.json"
    out.write_text(
        json.dumps({"rounds": rounds, "median": median, "ratio": ratio, "goal": GOAL}, indent=2) + "\n"
    )
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
