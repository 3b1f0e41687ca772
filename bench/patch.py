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
With --payload-gib N, the image is brought to the size the images it stands in for publish: a
component of N GiB (incompressible bytes, fixed by a seed: the same artifact every round and run)
is added to 25.03 below its pip layers, fetched from a loopback artifact server as a private SDK
artifact would be. The stand-in's own layers weigh about 0.3 GB; the images it stands in for
(vLLM, flashinfer, ray, transformers, ACCL-P and EIC above an accelerator SDK) several GB.
# assumed: 2 GiB for the layers above the SDK of a training-xpu-pytorch release (the seed gives
# no sizes); the figure is printed beside the result.
Both releases run their evaluation (issue 52: the cold release of 25.03 against its SDK, the
patch against its SDK and 25.03, each variant of both compiled in its own arm), as a release
runs it; `--no-evaluate` leaves it out of both, as before that issue. The cold release and its
patch are measured in the same round, one after the other, so a slow spell of the machine falls
on both; the ratio is taken per round. Goal: the patch under 30 % of the cold release with the
evaluation, 20 % without (the median ratio; its range over the rounds is printed beside it).
Prints a table and writes bench/results/patch.json (patch-noeval.json without the evaluation).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOALS = {True: 0.30, False: 0.20}  # with the evaluation, without
SDK, CPU = "pytorch-cpu-sdk:2.13.0", "training-cpu-pytorch:25.03"
SKIP = ("--no-evaluate", "bench/patch.py compares releases without the evaluation")
EVALUATE: list[str] = []  # what each measured release passes: SKIP with --no-evaluate
HIGH = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"
REGISTRIES: list[subprocess.Popen[bytes]] = []  # the round's own, stopped at its end


STAGE = re.compile(r"^\s+([a-z][a-z-]*): \w[\w ]* in ([0-9.]+) s\b", re.M)  # the release's own line per stage
STAGES: dict[str, dict[str, float]] = {}  # the last round's: what each release spent per stage


def run_xpu(root: Path, regs: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``xpu-release ARGS`` in the copy ``root`` against the registries file ``regs``."""
    argv = [sys.executable, "-m", "xpu_release", "--root", str(root), "--registries", str(regs), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env)


def keep_stages(ref: str, said: str) -> None:
    """What the release of ``ref`` said it spent per stage, into STAGES."""
    STAGES[ref] = {m[1]: float(m[2]) for m in STAGE.finditer(said)}


def xpu(root: Path, regs: Path, env: dict[str, str], *args: str, stages: str = "") -> float:
    started = time.monotonic()
    proc = run_xpu(root, regs, env, *args)
    if proc.returncode not in (0, 15):  # 15: watch says a patch is due
        sys.exit(f"xpu-release {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    if stages:
        keep_stages(stages, proc.stdout + proc.stderr)
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


TOKEN = "bench-patch-" + os.urandom(8).hex()  # the payload server's bearer token (env only)


def make_payload(folder: Path, gib: float) -> tuple[Path, str]:
    """A tar.gz of ``gib`` GiB of incompressible bytes (64 MiB files, a fixed seed): the same
    bytes every run. Returns the file and its sha256."""
    path = folder / f"payload-{gib}g.tar.gz"
    rng = random.Random(43)
    left = int(gib * 2**30)
    with tarfile.open(path, "w:gz", compresslevel=1, format=tarfile.PAX_FORMAT) as tar:
        n = 0
        while left > 0:
            size = min(left, 64 * 2**20)
            info = tarfile.TarInfo(f"lib/part-{n:03d}.so")
            info.size, info.mtime, info.mode = size, 0, 0o644
            tar.addfile(info, io.BytesIO(rng.randbytes(size)))
            left -= size
            n += 1
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(2**22):
            digest.update(chunk)
    return path, digest.hexdigest()


def serve_payload(path: Path) -> str:
    """Serve ``path`` on loopback to a bearer of TOKEN; the URL (the server lives as long as the
    script)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self.send_response(401)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(path.stat().st_size))
            self.end_headers()
            with path.open("rb") as fh:
                shutil.copyfileobj(fh, self.wfile, 2**20)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/sdk/payload.tar.gz"


def add_payload(root: Path, url: str, sha256: str, gib: float) -> None:
    """25.03 (and so its patch) gains the payload as its first, least-bumped component."""
    path = root / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    text = path.read_text()
    component = (
        'components:\n  payload:\n    kind: artifact\n    name: Payload\n    version: "1.0"\n'
        f"    url: {url}\n    sha256: {sha256}\n    format: tar.gz\n    dest: /opt/payload\n"
    )
    assert text.count("components:\n") == 1
    path.write_text(text.replace("components:\n", component))


def own_registries(tmp: Path) -> Path:
    """Four empty registries of Debian's docker-registry on free loopback ports (stopped by
    stop_registries), as a registries file: the stack's hub serves the base."""
    from bench.watch import start_registry

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
    return regs


def stop_registries() -> None:
    for proc in REGISTRIES:
        proc.terminate()
        proc.wait()
    REGISTRIES.clear()


def one_round(tmp: Path, payload: tuple[str, str, float] | None) -> dict[str, float]:
    root = tmp / "repo"
    for name in ("manifests", "images", "templates", "schema"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy(ROOT / "registries.yaml", root / "registries.yaml")
    if payload:
        add_payload(root, *payload)
        subprocess.run([sys.executable, "-m", "xpu_release", "--root", str(root), "render", CPU],
                       check=True, capture_output=True)  # fmt: skip
    cache = tmp / "cache"
    cache.mkdir()
    if (host_cache() / "blobs").is_dir():  # the download cache warm, nothing else
        shutil.copytree(host_cache() / "blobs", cache / "blobs")
    env = {**os.environ, "XPU_RELEASE_CACHE": str(cache), "XPU_RELEASE_ARTIFACT_TOKEN": TOKEN}
    regs = own_registries(tmp)
    osv = tmp / "osv"
    osv.mkdir()
    # A stack whose debootstrap met other Debian versions: re-pinned here, parents first (the
    # child's lock pins the SDK release as this namespace serves it).
    xpu(root, regs, env, "lock", SDK)
    xpu(root, regs, env, "release", SDK, "--no-scan", "bench setup", *SKIP)
    xpu(root, regs, env, "lock", CPU)
    cold_build = xpu(root, regs, env, "build", CPU, "--no-cache")
    cold_release = xpu(root, regs, env, "release", CPU, "--advisories", str(osv), *EVALUATE, stages="cold")
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
    release = xpu(root, regs, env, "release", "training-cpu-pytorch:25.03.1", "--advisories", str(osv),
                  *EVALUATE, stages="patch")  # fmt: skip
    return {"cold_build": cold_build, "cold_release": cold_release, "cold": cold_build + cold_release,
            "watch": watch, "patch": patch, "patch_release": release,
            "patched": watch + patch + release,
            "ratio": (watch + patch + release) / (cold_build + cold_release)}  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--payload-gib", type=float, default=0.0, help="bring the image to its users' size")
    parser.add_argument("--no-evaluate", action="store_true", help="both releases without their evaluation")
    args = parser.parse_args()
    EVALUATE[:] = SKIP if args.no_evaluate else []
    goal = GOALS[not args.no_evaluate]
    if not os.environ.get("XPU_STACK_DIR"):
        sys.exit('the local stack: run `ci/local-stack.sh up && eval "$(ci/local-stack.sh env)"` first')
    rounds = []
    payload = None
    held = tempfile.TemporaryDirectory(prefix="xpu-bench-payload-")
    if args.payload_gib > 0:
        path, sha256 = make_payload(Path(held.name), args.payload_gib)
        payload = (serve_payload(path), sha256, args.payload_gib)
        print(
            f"payload: {args.payload_gib} GiB ({path.stat().st_size / 2**30:.2f} GiB as a tar.gz)", flush=True
        )
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="xpu-bench-patch-") as tmp:
            try:
                rounds.append(one_round(Path(tmp), payload))
            finally:  # the round's registries, however it ended
                stop_registries()
        print(f"round {n + 1}: cold {rounds[-1]['cold']:.1f} s, patch {rounds[-1]['patched']:.1f} s, "
              f"ratio {rounds[-1]['ratio']:.3f}", flush=True)  # fmt: skip
        # Each round's stages as it ends (a run stopped early keeps what it measured).
        cold, patch = STAGES.get("cold", {}), STAGES.get("patch", {})
        pairs = (f"{k} {cold.get(k, 0):.1f}/{patch.get(k, 0):.1f}" for k in dict.fromkeys([*cold, *patch]))
        print("  stages (cold / patch): " + ", ".join(pairs), flush=True)
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
    size = f"with a {args.payload_gib} GiB payload" if payload else "the stand-in at its own size"
    size += ", without the evaluation" if args.no_evaluate else ", each with its evaluation"
    print(f"\na patch release against a cold release ({size}), median of {args.rounds} rounds\n")
    for name, seconds in rows:
        print(f"  {name:<78} {seconds:7.1f} s")
    verdict = "met" if ratio <= goal else "NOT met"
    if STAGES:
        print("\n  the last round's releases, stage by stage (seconds, as `release` prints them)")
        for name in dict.fromkeys([*STAGES.get("cold", {}), *STAGES.get("patch", {})]):
            cold_s, patch_s = (str(STAGES.get(k, {}).get(name, "-")) for k in ("cold", "patch"))
            print(f"    {name:<20} cold {cold_s:>6}   patch {patch_s:>6}")
    print(f"\n  patch / cold = {ratio:.3f} (median of the rounds' ratios; range {low:.3f} to {high:.3f}; "
          f"goal <= {goal:.2f}: {verdict})")  # fmt: skip
    held.cleanup()
    name = "patch" if not payload else f"patch-{args.payload_gib}g"
    out = ROOT / "bench" / "results" / (name + ("-noeval" if args.no_evaluate else "") + ".json")
    result = {"rounds": rounds, "median": median, "ratio": ratio, "range": [low, high], "goal": goal,
              "payload_gib": args.payload_gib, "evaluate": not args.no_evaluate}  # fmt: skip
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
