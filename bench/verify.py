"""`verify --deep` against a raw read of the same bytes, side by side (a script, not a timed test).

    ci/release-local.sh && eval "$(ci/local-stack.sh env)" && python bench/verify.py [--ref REF]
    eval "$(ci/local-stack.sh env)" && python bench/verify.py --size 4GB   # the size users publish

REF (default training-cpu-pytorch:25.03, 1.2 GB) must be released on the stack; ci/release-local.sh
does. ``--size`` measures instead the image `bench/publish.py --size` makes (half real wheel
content, half random bytes), published by xpu-release's publisher, outside the timing, to a public
and 3 region registries of its own whose blobs are kept on disk (as bench/publish.py does), with
a release record written where the CLI reads it; the whole command (``deep``, below) is left out
there, since it also checks the SBOM and provenance a release attaches, which the generated image
has none of. Measures, medians of 3, alternating:

- deep: `xpu-release verify REF --deep`, its whole process: every blob of the image and of its
  SBOM and provenance downloaded from every endpoint (public + 3 regions) and hashed;
- library: the same check in this process (``release.verify.verify`` with the record's digest and
  attachments): what checking costs without starting Python and importing the CLI's libraries;
- raw: the same image blobs from the same endpoints, through the same HTTP client and the same
  parallelism (8), read and thrown away: no hashing, no checking, no process to start;
- with ``--size`` also: copy, the library with every copy of a blob read and hashed on its own,
  as verify did before it read a blob's copies in step, hashed the first and compared the rest.
  ``--one-layer`` makes the image the base and one random layer: the shape where one blob is
  nearly all the bytes, so one worker reads it at every endpoint.

Beside each: the CPU seconds of the whole machine (/proc/stat), the registries' included: on this
2-core runner they serve over loopback, so what the reader spends competes with what they spend.
The ratio library / raw is the price of checking every byte; #20's goal is <= 1.3. Prints a table
and writes bench/results/verify-<REF>.json (with --size: verify-<size>.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.3


class Target(NamedTuple):
    """A release to check: the repository that holds its manifest and record, its ref, and the
    registries file that names its endpoints (None: the repository's own, or the environment's)."""

    root: Path
    ref: str
    registries: str | None = None

    def env(self) -> dict[str, str]:
        return {**os.environ, **({"XPU_RELEASE_REGISTRIES": self.registries} if self.registries else {})}


Method = Callable[[Target], tuple[float, float, int]]  # wall s, CPU s of the process, bytes


def machine_cpu() -> float:
    """CPU seconds every process on the machine has spent (user + system), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return (int(fields[0]) + int(fields[1]) + int(fields[2])) / os.sysconf("SC_CLK_TCK")


def deep(target: Target) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of the process and bytes hashed of one `verify --deep`."""
    ref = target.ref
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "xpu_release", "--root", str(target.root), "verify", ref, "--deep", "--json"],
        capture_output=True, text=True, check=False, env=target.env(),
    )  # fmt: skip
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"verify --deep {ref} failed:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, int(json.loads(proc.stdout)["bytes_hashed"])


def setting(target: Target) -> tuple[Any, Any, Any]:
    """The spec, registries and credentials of ``target``, as the CLI makes them at its start."""
    from xpu_release import settings
    from xpu_release.manifest import Repo
    from xpu_release.manifest.registries import load_registries
    from xpu_release.oci.credentials import CredentialStore

    current = settings.use(settings.Settings.from_env(os.environ))
    repo = Repo.discover(str(target.root))
    spec = repo.load_ref(target.ref)
    registries = load_registries(repo.root, target.env().get("XPU_RELEASE_REGISTRIES"))
    hosts = frozenset(ep.host for ep in registries.publish_endpoints())
    return spec, registries, CredentialStore.from_settings(current, release_hosts=hosts)


def library(target: Target) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and bytes hashed of the deep check run in this process."""
    from xpu_release.oci.channel import VERIFYING
    from xpu_release.release.model import record as records
    from xpu_release.release.model.pool import EndpointPool
    from xpu_release.release.publishing.verify import verify

    spec, registries, credentials = setting(target)
    record = records.read_optional(records.default_path(target.root, spec.image, spec.version))
    assert record is not None, f"{target.ref} has no release record: run ci/release-local.sh"
    cpu0 = time.process_time()
    started = time.monotonic()
    attached = record.attachments or None
    pool = EndpointPool(spec, registries, credentials, VERIFYING)
    report = verify(pool, record.digest, deep=True, attachments=attached)
    wall = time.monotonic() - started
    allowed = set() if attached else {"attachments"}  # the generated image has no SBOM, no provenance
    assert {f.what for f in report.findings} <= allowed, report.findings
    return wall, time.process_time() - cpu0, report.bytes_hashed


def every_copy(target: Target) -> tuple[float, float, int]:
    """``library`` with every copy of a blob read and hashed on its own, as verify did before it
    read a blob's copies in step and compared them (``copy`` in the table)."""
    from xpu_release.release.publishing import blobjobs as module

    real = module.in_step
    module.in_step = lambda blobs: [[i] for i in range(len(blobs))]
    try:
        return library(target)
    finally:
        module.in_step = real


def raw(target: Target) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and bytes of reading the release's blobs at every endpoint."""
    from xpu_release.oci.transport import RetryPolicy
    from xpu_release.release.model.pool import EndpointPool

    spec, registries, credentials = setting(target)
    endpoints = EndpointPool(spec, registries, credentials, RetryPolicy(attempts=3))
    jobs: list[tuple[Any, str, str]] = []
    for planned in endpoints.plan.targets:
        client, name = endpoints.client(planned.endpoint), endpoints.repo(planned.endpoint)
        manifest = client.get_manifest(name, spec.version)
        assert manifest is not None, f"{planned.endpoint.name} serves no {spec.ref}"
        jobs += [(client, name, digest) for digest, _size in manifest.blobs()]

    def read(job: tuple[Any, str, str]) -> int:
        client, name, digest = job
        resp = client.open_blob(name, digest)
        try:
            return sum(len(block) for block in resp.iter_content(1 << 20))
        finally:
            resp.close()

    cpu0 = time.process_time()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        total = sum(pool.map(read, jobs))
    return time.monotonic() - started, time.process_time() - cpu0, total


@contextmanager
def large_release(size: str, one_layer: bool = False) -> Iterator[Target]:
    """The image of ``bench/publish.py --size`` (``one_layer``: the base and one layer of random
    bytes, the rest of the size) published by xpu-release's publisher to a public and 3 region
    registries of its own (blobs on disk), its record where the CLI reads it; the registries are
    stopped and removed after."""
    sys.path.insert(0, str(ROOT))
    from bench.publish import bench_repo, fresh_registries, make_large_image, parse_size, publish
    from xpu_release.release.model import record as records

    if one_layer:
        make_one_layer_image(parse_size(size))
    else:
        make_large_image(parse_size(size))
    with tempfile.TemporaryDirectory() as tmp, fresh_registries(4, "disk") as hosts:
        repo = bench_repo(Path(tmp))
        record, _ = publish(hosts[0], hosts[1:], repo)
        records.write(record, records.default_path(repo, "bench-publish", "1.0"))
        yield Target(repo, "bench-publish:1.0", str(repo / "regs.yaml"))


def make_one_layer_image(size: int) -> None:
    """The base and one layer of random bytes: the shape where one blob is nearly all the bytes."""
    sys.path.insert(0, str(ROOT))
    from bench.publish import IMAGE, sh

    with tempfile.TemporaryDirectory() as ctx:
        Path(ctx, "Dockerfile").write_text(
            "FROM 127.0.0.1:15000/base/debian/bookworm-python:12\n"
            f"RUN mkdir /data && head -c {size // 10**6 - 170}M /dev/urandom > /data/random.bin\n"
        )
        sh("docker", "build", "-q", "--network=none", "--label", "io.xpu-release.bench=publish",
           "-t", IMAGE, ctx)  # fmt: skip


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--ref", default="training-cpu-pytorch:25.03")
    parser.add_argument("--size", help="instead of --ref: a generated image of this size, e.g. 4GB")
    parser.add_argument("--one-layer", action="store_true", help="with --size: the base and one random layer")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.chdir(ROOT)
    # The CLI also wants the SBOM and provenance a release attaches; the generated image has none.
    sizes: dict[str, Method] = {"library": library, "copy": every_copy, "raw": raw}
    methods = sizes if args.size else {"cli": deep, "library": library, "raw": raw}
    made = (
        large_release(args.size, args.one_layer)
        if args.size
        else contextlib.nullcontext(Target(ROOT, args.ref))
    )
    with made as target:
        runs = measure(target, methods, args.runs)
    med = {k: [float(statistics.median(r[i] for r in v)) for i in range(4)] for k, v in runs.items()}
    ratio = med["library"][0] / med["raw"][0]
    shown = (args.size + ("-one-layer" if args.one_layer else "")) if args.size else args.ref
    print(f"{shown}: public + regions, medians of {args.runs}")
    print(f"{'method':<8} {'wall':>8} {'MB/s':>7} {'CPU s':>7} {'machine CPU s':>14} {'bytes':>10}")
    for name, (wall, cpu, size, machine) in med.items():
        rate = size / wall / 1e6
        print(f"{name:<8} {wall:>6.1f} s {rate:>7.0f} {cpu:>7.1f} {machine:>14.1f} {size / 1e9:>7.2f} GB")
    cli = f"; cli / raw = {med['cli'][0] / med['raw'][0]:.2f}" if "cli" in med else ""
    print(f"library / raw = {ratio:.2f} (goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'}){cli}")
    out = ROOT / "bench" / "results" / f"verify-{shown.replace(':', '-')}.json"
    report = {"ref": target.ref, "size": args.size, "runs": runs, "median": med,
              "ratio": ratio, "goal": GOAL, "goal_met": ratio <= GOAL}  # fmt: skip
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


def measure(
    target: Target, methods: dict[str, Method], repeat: int
) -> dict[str, list[tuple[float, float, int, float]]]:
    """Each method ``repeat`` times, alternating: (wall, CPU of the process, bytes, CPU of the machine)."""
    runs: dict[str, list[tuple[float, float, int, float]]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, method in methods.items():
            before = machine_cpu()
            runs[name].append((*method(target), machine_cpu() - before))
    return runs


if __name__ == "__main__":
    main()
