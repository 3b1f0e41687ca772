"""A patch release against a cold release (issue #39; a script, not a timed test), on the local
stack: the time from a new advisory to the verified publish of the patch that fixes it, beside
the time of a cold release of the image it patches.

    ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"
    python bench/patch.py [--rounds 3]

Each round, in a temporary copy of this repository, with registries of its own (four of
Debian's `docker-registry` on free loopback ports, empty: every layer is sent, none mounted from
another namespace) and a cache of its own (empty but for the wheel and artifact blobs, which are
content-addressed by the committed locks: a runner's warm download cache):
  setup  the SDK (pytorch-cpu-sdk:2.13.0) released there (not measured);
  cold   training-cpu-pytorch:25.03 built with --no-cache (the engine's layer cache unused), then
         released: its smoke test (no marker of an earlier test: the cache is the round's), scan,
         publish of every layer, verify, notes, record;
  patch  an advisory against its accelerate (high, fixed in 1.6.0) is added; then `watch` (finds
         it), `patch` (the next patch's manifest, lock and Dockerfile) and `release` of the patch
         (a one-pin rebuild, its smoke test, scan, publish of the new layers, verify); an image of
         the patch left in the engine by an earlier round is removed first (else its release
         would skip the build, and export the image at publish instead).
Both releases run with --no-evaluate (the evaluation costs both the same; bench/evaluate.py
measures it). The cold release and its patch are measured in the same round, one after the
other, so a slow spell of the machine falls on both; the ratio is taken per round. Goal: the
patch under 20 % of the cold release (the median ratio; its range over the rounds is printed
beside it). Prints a table and writes bench/results/patch.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOAL = 0.20
SDK, CPU = "pytorch-cpu-sdk:2.13.0", "training-cpu-pytorch:25.03"
SKIP = ("--no-evaluate", "bench/patch.py compares releases without the evaluation")
HIGH = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"
REGISTRIES: list[subprocess.Popen[bytes]] = []  # the round's own, stopped at its end


STAGE = re.compile(r"^\s+([a-z][a-z-]*): \w[\w ]* in ([0-9.]+) s\b", re.M)  # the release's own line per stage
STAGES: dict[str, dict[str, float]] = {}  # the last round's: what each release spent per stage


def xpu(root: Path, regs: Path, env: dict[str, str], *args: str, stages: str = "") -> float:
    started = time.monotonic()
    argv = [sys.executable, "-m", "xpu_release", "--root", str(root), "--registries", str(regs), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if proc.returncode not in (0, 15):  # 15: watch says a patch is due
        sys.exit(f"xpu-release {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    if stages:
        STAGES[stages] = {m[1]: float(m[2]) for m in STAGE.finditer(proc.stdout + proc.stderr)}
    return time.monotonic() - started


def forget_images(version: str) -> None:
    """Remove from the stack's engine the images xpu-release built of training ``version``."""
    labels = [
        f"org.opencontainers.image.version={version}",
        "org.opencontainers.image.title=training-cpu-pytorch",
    ]
    argv = ["docker", "images", "-q", *(a for label in labels for a in ("--filter", f"label={label}"))]
    found = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    if found:
        subprocess.run(["docker", "rmi", "-f", *sorted(set(found))], capture_output=True, check=False)


def host_cache() -> Path:
    return Path(os.environ.get("XPU_RELEASE_CACHE") or Path.home() / ".cache" / "xpu-release")


def one_round(tmp: Path) -> dict[str, float]:
    from bench.watch import start_registry

    root = tmp / "repo"
    for name in ("manifests", "images", "templates", "schema"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy(ROOT / "registries.yaml", root / "registries.yaml")
    cache = tmp / "cache"
    cache.mkdir()
    if (host_cache() / "blobs").is_dir():  # the download cache warm, nothing else
        shutil.copytree(host_cache() / "blobs", cache / "blobs")
    env = {**os.environ, "XPU_RELEASE_CACHE": str(cache)}
    hosts = []
    for name in ("public", "cn-beijing", "cn-wulanchabu", "cn-shanghai"):
        (tmp / name).mkdir()
        proc, host = start_registry(tmp / name)
        REGISTRIES.append(proc)
        hosts.append(host)
    regs = tmp / "regs.yaml"
    regs.write_text(
        "registries:\n"
        f"  public: {{host: '{hosts[0]}', namespace: bench, insecure: true}}\n"
        "  vpc:\n    namespace: bench\n    insecure: true\n"
        "    regions: [cn-beijing, cn-wulanchabu, cn-shanghai]\n"
        f"    hosts: {{cn-beijing: '{hosts[1]}', cn-wulanchabu: '{hosts[2]}', cn-shanghai: '{hosts[3]}'}}\n"
        "  hub: {host: '127.0.0.1:15000', namespace: base, insecure: true}\n"
    )
    osv = tmp / "osv"
    osv.mkdir()
    # A stack whose debootstrap met other Debian versions: re-pinned here, parents first (the
    # child's lock pins the SDK release as this namespace serves it).
    xpu(root, regs, env, "lock", SDK)
    xpu(root, regs, env, "release", SDK, "--no-scan", "bench setup", *SKIP)
    xpu(root, regs, env, "lock", CPU)
    cold_build = xpu(root, regs, env, "build", CPU, "--no-cache")
    cold_release = xpu(root, regs, env, "release", CPU, "--advisories", str(osv), *SKIP, stages="cold")
    when = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = {"schema_version": "1.6.0", "id": "BENCH-PATCH-1", "aliases": ["CVE-2099-0401"],
              "modified": when, "published": when, "severity": [{"type": "CVSS_V3", "score": HIGH}],
              "affected": [{"package": {"ecosystem": "PyPI", "name": "accelerate"}, "ranges": [
                  {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.6.0"}]}]}]}  # fmt: skip
    (osv / "accelerate.json").write_text(json.dumps(record))
    # The patch is built in this round: an image of its inputs that an earlier round (or run)
    # left in the engine would let its release skip the build (and export it at publish).
    forget_images("25.03.1")
    watch = xpu(root, regs, env, "watch", CPU, "--advisories", str(osv))
    patch = xpu(root, regs, env, "patch", CPU, "--advisories", str(osv))
    release = xpu(root, regs, env, "release", "training-cpu-pytorch:25.03.1", "--advisories", str(osv), *SKIP,
                  stages="patch")  # fmt: skip
    return {"cold_build": cold_build, "cold_release": cold_release, "cold": cold_build + cold_release,
            "watch": watch, "patch": patch, "patch_release": release,
            "patched": watch + patch + release,
            "ratio": (watch + patch + release) / (cold_build + cold_release)}  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("XPU_STACK_DIR"):
        sys.exit('the local stack: run `ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"` first')
    rounds = []
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="xpu-bench-patch-") as tmp:
            try:
                rounds.append(one_round(Path(tmp)))
            finally:  # the round's registries, however it ended
                for proc in REGISTRIES:
                    proc.terminate()
                    proc.wait()
                REGISTRIES.clear()
        print(f"round {n + 1}: cold {rounds[-1]['cold']:.1f} s, patch {rounds[-1]['patched']:.1f} s, "
              f"ratio {rounds[-1]['ratio']:.3f}", flush=True)  # fmt: skip
    median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    ratio = median["ratio"]
    low, high = min(r["ratio"] for r in rounds), max(r["ratio"] for r in rounds)
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
    print(f"\na patch release against a cold release, median of {args.rounds} rounds\n")
    for name, seconds in rows:
        print(f"  {name:<78} {seconds:7.1f} s")
    verdict = "met" if ratio <= GOAL else "NOT met"
    if STAGES:
        print("\n  the last round's releases, stage by stage (seconds, as `release` prints them)")
        for name in dict.fromkeys([*STAGES.get("cold", {}), *STAGES.get("patch", {})]):
            cold_s, patch_s = (str(STAGES.get(k, {}).get(name, "-")) for k in ("cold", "patch"))
            print(f"    {name:<20} cold {cold_s:>6}   patch {patch_s:>6}")
    print(f"\n  patch / cold = {ratio:.3f} (median of the rounds' ratios; range {low:.3f} to {high:.3f}; "
          f"goal <= {GOAL:.2f}: {verdict})")  # fmt: skip
    out = ROOT / "bench" / "results" / "patch.json"
    out.write_text(
        json.dumps(
            {"rounds": rounds, "median": median, "ratio": ratio, "range": [low, high], "goal": GOAL}, indent=2
        )
        + "\n"
    )
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
