"""Publish benchmark (a script, not a timed test): one image of a few hundred MB, one public
and N VPC-region registries on loopback (empty ones, started for each measured run), three
ways side by side in one run:

    naive   `docker push` to every endpoint
    peer    `docker push` once, then `skopeo copy` to every other endpoint
    engine  xpu-release's publisher with the first push made by `docker push` (--engine-push)
    ours    xpu-release's publisher: the first push by its own client (deterministic gzip,
            layers compressed in parallel), then every region in parallel from the local spool

    eval "$(ci/local-stack.sh env)" && python bench/publish.py [--repeat 3] [--sweep]
    python bench/publish.py --size 4GB [--repeat 3]     # the size users publish
    python bench/publish.py --size 4GB --methods peer,built   # ours after our build spooled the blobs
    python bench/publish.py --size 4GB --export   # only `docker save`: what bounds ours without the spool
    python bench/publish.py --image training-cpu-pytorch:25.03   # an image built in the engine

``--size`` builds an image of about that size instead: the base, layers of real wheel content
(the torch 2.13.0+cpu wheel unpacked, one copy per layer: the compressible part, about half)
and layers of random bytes (the rest, at most 1 GB a layer); its registries keep their blobs on
disk. ``--image REF`` measures an image the engine already holds instead (this project's own
1.2 GB training image, as `ci/release-local.sh` builds it), the same way. Each method then runs
in a process of its own, and beside the wall time the table gives
the first push (time until the first endpoint serves the image, and the image's MB/s over it),
the bytes every registry stored in all (what was sent, less retries), the CPU seconds of the
method's process and its children, the CPU seconds the engine (dockerd) spent meanwhile, and the
process's peak RSS. Writes bench/results/publish-<size>.json (publish-<image>-<version>.json).

The headline is public + 3 regions; `--sweep` also measures 1, 2, 3, 6, 9 and 12 regions.
Every run starts with empty registries and, for ours, an empty xpu-release cache (nothing is
compressed ahead). Registries are plain HTTP here (auth and TLS cost the same for every
method). Prints a table, writes bench/results/publish.json and bench/results/publish.svg.

Where the simulated registries keep their blobs (``--storage``): ``memory`` (the default) puts
them in /dev/shm, ``disk`` in /tmp. Real regions are machines with disks of their own; here
every registry shares this machine's one virtual disk, which takes about 200 MB/s of writes, so
on ``disk`` the thirteenth registry's writes queue behind the other twelve's and the figure
measures this VM's disk, not the publisher. ``--regions-ratio`` also measures the ``floor``:
the same compressed blobs PUT by a bare client to every endpoint at once, with nothing else,
so ours minus floor is what the publisher itself adds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "bench-publish:1.0"
GOALS = {"ours_vs_naive": 0.25, "ours_vs_peer": 0.7, "twelve_vs_three_regions": 1.5}
GOALS_LARGE = {"ours_vs_peer": 0.5}  # --size: an image of the size users publish (#20)
TORCH_WHEEL = "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"  # pip find-links here
UNPACKED_MB = 755  # what the copies count assumes a layer holds (an unzipped copy is about 700)
SWEEP = (1, 2, 3, 6, 9, 12)

MANIFEST = """\
image: bench-publish
version: "1.0"
title: {en: bench, zh: bench}
scenario: [training]
framework: pytorch
accelerator: {name: CPU, kind: cpu}
base: {registry: hub, repository: debian/bookworm-python, tag: "12", python: /usr/bin/python3}
components: {}
floating_tags: [latest]
"""


def sh(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(args, check=True, capture_output=True, env={**os.environ, **(env or {})})


def make_image(mb: int) -> None:
    """The base (about 170 MB) plus one incompressible layer: a few hundred MB in all."""
    with tempfile.TemporaryDirectory() as ctx:
        Path(ctx, "Dockerfile").write_text(
            "FROM 127.0.0.1:15000/base/debian/bookworm-python:12\n"
            f"RUN head -c {mb}M /dev/urandom > /payload.bin\n"
        )
        sh("docker", "build", "-q", "--network=none", "-t", IMAGE, ctx)


def parse_size(text: str) -> int:
    """``4GB``, ``1.5GB``, ``800MB`` → bytes (decimal units, as the tables print them)."""
    units = {"GB": 10**9, "MB": 10**6}
    for unit, factor in units.items():
        if text.upper().endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    msg = f"--size {text}: give it in MB or GB, e.g. 4GB"
    raise SystemExit(msg)


def make_large_image(size: int) -> None:
    """An image of about ``size`` bytes: half real wheel content, half random bytes."""
    base_mb, total_mb = 170, size // 10**6
    copies = max(1, round((total_mb - base_mb) / 2 / UNPACKED_MB))
    random_mb = max(0, total_mb - base_mb - copies * UNPACKED_MB)
    chunks = [1000] * (random_mb // 1000) + ([random_mb % 1000] if random_mb % 1000 else [])
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copy(TORCH_WHEEL, Path(ctx, "torch.whl"))
        lines = [
            "FROM 127.0.0.1:15000/base/debian/bookworm-python:12 AS wheel",
            "COPY torch.whl /tmp/torch.whl",
            "RUN python3 -m zipfile -e /tmp/torch.whl /out",
            "FROM 127.0.0.1:15000/base/debian/bookworm-python:12",
            *(f"COPY --from=wheel /out/ /data/wheel-{i}/" for i in range(copies)),
            *(f"RUN head -c {mb}M /dev/urandom > /data/random-{j}.bin" for j, mb in enumerate(chunks)),
        ]
        Path(ctx, "Dockerfile").write_text("\n".join(lines) + "\n")
        sh("docker", "build", "-q", "--network=none", "--label", "io.xpu-release.bench=publish",
           "-t", IMAGE, ctx)  # fmt: skip


STORAGE = {"memory": "/dev/shm", "disk": None}  # where the registries' blobs live (None: /tmp)


class Hosts(list[str]):
    """The registries of one measured run, and the folder that keeps their blobs."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def stored_bytes(self) -> int:
        """Every blob every registry keeps: the bytes that arrived, less retries and headers."""
        return sum(p.stat().st_size for p in self.root.glob("data*/docker/registry/v2/blobs/**/data"))


@contextmanager
def fresh_registries(count: int, storage: str = "memory") -> Iterator[Hosts]:
    """``count`` empty plain-HTTP registries on loopback, started for one measured run (outside
    its timing) and removed after it: no run finds blobs an earlier run left behind."""
    where = STORAGE[storage]
    if where is not None and not Path(where).is_dir():
        msg = f"--storage {storage} needs {where}; use --storage disk"
        raise SystemExit(msg)
    tmp = Path(tempfile.mkdtemp(prefix="bench-registries-", dir=where))
    procs, hosts = [], Hosts(tmp)
    try:
        for i in range(count):
            port = 15110 + i
            conf = tmp / f"r{i}.yml"
            conf.write_text(
                "version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\n"
                f"storage: {{filesystem: {{rootdirectory: {tmp}/data{i}}}, delete: {{enabled: true}}}}\n"
                f"http: {{addr: '127.0.0.1:{port}'}}\n"
            )
            procs.append(
                subprocess.Popen(
                    ["docker-registry", "serve", str(conf)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            hosts.append(f"127.0.0.1:{port}")
        import requests

        deadline = time.monotonic() + 30
        for host in hosts:
            while True:
                try:
                    requests.get(f"http://{host}/v2/", timeout=1)
                    break
                except requests.RequestException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        yield hosts
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def naive(public: str, regions: list[str]) -> float:
    """Returns the seconds until the first endpoint served the image (so do the others)."""
    started, first = time.monotonic(), 0.0
    for host in [public, *regions]:
        ref = f"{host}/bench/bench-publish:1.0"
        sh("docker", "tag", IMAGE, ref)
        sh("docker", "push", "-q", ref)
        first = first or time.monotonic() - started
    return first


def peer(public: str, regions: list[str]) -> float:
    src = f"{public}/bench/bench-publish:1.0"
    started = time.monotonic()
    sh("docker", "tag", IMAGE, src)
    sh("docker", "push", "-q", src)
    first = time.monotonic() - started
    for host in regions:
        sh("skopeo", "copy", "-q", "--src-tls-verify=false", "--dest-tls-verify=false",
           f"docker://{src}", f"docker://{host}/bench/bench-publish:1.0")  # fmt: skip
    return first


def ours(public: str, regions: list[str], repo: Path, **options: Any) -> float:
    """Publish with xpu-release's publisher (``options``: ``publish``'s). Returns the seconds until
    the public endpoint was verified."""
    record, started = publish(public, regions, repo, **options)
    (public_record,) = [e for e in record.endpoints if e.endpoint == "public"]
    assert public_record.verified_at is not None
    verified = datetime.strptime(public_record.verified_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return verified.timestamp() - started


def publish(
    public: str,
    regions: list[str],
    repo: Path,
    *,
    engine_push: bool = False,
    keep_blobs: Path | None = None,
    cache: Path | None = None,
) -> tuple[Any, float]:
    """The bench image published by xpu-release's publisher to ``public`` and ``regions`` (their
    registries file is ``repo/regs.yaml``), from an empty cache (``cache``: that one instead;
    ``keep_blobs``: copy the blobs it spooled there): its release record, complete, and the time
    (epoch seconds) the publish itself started."""
    from dataclasses import replace

    from xpu_release import settings as current
    from xpu_release.image.engine import Engine
    from xpu_release.image.layerform import LayerForm
    from xpu_release.manifest import Repo
    from xpu_release.manifest.registries import load_registries
    from xpu_release.oci.credentials import CredentialStore
    from xpu_release.release.model.line import Line
    from xpu_release.release.model.pool import EndpointPool
    from xpu_release.release.publishing.publish import Options, Publisher, publish_with
    from xpu_release.settings import Settings

    regs = repo / "regs.yaml"
    regs.write_text(
        "registries:\n"
        f"  public: {{host: '{public}', namespace: bench, insecure: true}}\n"
        "  vpc:\n    namespace: bench\n    insecure: true\n"
        f"    regions: [{', '.join(f'r{i}' for i in range(len(regions)))}]\n"
        "    hosts:\n" + "".join(f"      r{i}: '{h}'\n" for i, h in enumerate(regions))
    )
    spec = Repo(repo).load("bench-publish", "1.0")
    base = Settings.from_env(os.environ)
    current.use(base)
    engine = Engine.connect()
    image_id = engine.require_image(IMAGE).id
    empty = tempfile.TemporaryDirectory(prefix="bench-cache-")
    with contextlib.nullcontext(str(cache)) if cache else empty as folder:
        settings = current.use(replace(base, cache=Path(folder)))  # what was spooled ahead, or nothing
        try:
            # The same publisher `xpu-release publish` runs; only its "was it smoke-tested" gate
            # is skipped, since this synthetic image has no smoke tests.
            registries = load_registries(repo, str(regs))
            form = LayerForm(
                estargz=estargz_layers()
            )  # an eStargz image's layers as its release publishes them
            options = Options(engine_push=engine_push, line=Line(Repo(repo)), form=form)
            credentials = CredentialStore.from_settings(settings)
            pool = EndpointPool(spec, registries, credentials)
            publisher = Publisher(pool, engine, options, lambda _: None)
            started = time.time()
            record = publish_with(publisher, image_id, "")
            if keep_blobs is not None:
                for blob in (Path(folder) / "oci-blobs").glob("sha256-*"):
                    shutil.copy(blob, keep_blobs / blob.name)
        finally:
            current.use(base)
    assert record.complete, record
    return record, started


def engine_first(public: str, regions: list[str], repo: Path) -> float:
    return ours(public, regions, repo, engine_push=True)


def built(public: str, regions: list[str], repo: Path) -> float:
    """Ours, publishing an image as `xpu-release build` leaves it: every layer's blob already in
    the spool (``prepare_spool``, untimed, in the cache the parent names)."""
    return ours(public, regions, repo, cache=Path(os.environ["XPU_BENCH_CACHE"]))


def prepare_spool(cache: Path) -> float:
    """Compress every layer of the bench image into ``cache``'s spool with the default codec, as
    the build does with each layer it writes (``oci.members.spool_layer``). Returns the seconds the
    compression took (the export that gives the layer files here is not counted: a build has
    them at hand)."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from xpu_release import settings as current
    from xpu_release.image.engine import Engine
    from xpu_release.image.export import save_layers
    from xpu_release.image.layerform import LayerForm
    from xpu_release.oci.codec import DEFAULT
    from xpu_release.oci.estargz import written_profile
    from xpu_release.oci.members import spool_estargz, spool_layer
    from xpu_release.oci.store import remember_config
    from xpu_release.settings import Settings

    base = Settings.from_env(os.environ)
    current.use(replace(base, cache=cache))
    try:
        engine = Engine.connect()
        image_id = engine.require_image(IMAGE).id
        diff_ids = engine.inspect_raw(image_id)["RootFS"]["Layers"]
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            config, files = save_layers(engine, image_id, set(diff_ids), Path(tmp))
            remember_config(config)
            started = time.monotonic()
            with ThreadPoolExecutor(max_workers=2) as pool:
                for diff_id, path in files.items():
                    # An eStargz image's own layers as its build spools them (normalize writes
                    # each with its profile); its base's gzip layers as any layer.
                    profile = written_profile(path) if estargz_layers() else None
                    if profile is None:
                        spool_layer(path, diff_id, DEFAULT, pool)
                    else:
                        spool_estargz(path, None, DEFAULT, LayerForm(estargz=True).blob_key, profile, pool)
            return time.monotonic() - started
    finally:
        current.use(base)


def compressed_blobs(repo: Path, storage: str) -> list[Path]:
    """The layer blobs ours pushes for the bench image (the config, a few KB, is left out), made by
    a publish to throwaway registries, and kept for the floor."""
    keep = repo.parent / "floor-blobs"  # beside the bench's repository copy, removed with it
    keep.mkdir(exist_ok=True)
    with fresh_registries(2, storage) as hosts:
        ours(hosts[0], hosts[1:], repo, keep_blobs=keep)
    return sorted(keep.iterdir())


def floor(hosts: list[str], blobs: list[Path]) -> None:
    """The physical floor of a publish: every blob PUT (one POST, one monolithic PUT) to every
    endpoint at once, by a bare client that checks nothing and writes no manifest."""
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urljoin

    import requests

    def to(host: str) -> None:
        session, base = requests.Session(), f"http://{host}/"
        for blob in blobs:
            start = session.post(f"{base}v2/bench/bench-publish/blobs/uploads/", timeout=60)
            location = urljoin(base, start.headers["Location"])
            digest = blob.name.replace("-", ":", 1)
            with blob.open("rb") as body:
                done = session.put(f"{location}&digest={digest}", data=body, timeout=300,
                                   headers={"Content-Type": "application/octet-stream"})  # fmt: skip
            if done.status_code != 201:
                msg = f"{host}: PUT {digest} answered {done.status_code}"
                raise RuntimeError(msg)

    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        list(pool.map(to, hosts))


METHODS = {"naive": naive, "peer": peer, "engine": engine_first, "ours": ours}
LARGE_METHODS = {**METHODS, "built": built}  # --size / --image only, chosen with --methods
FIGURES = (
    "wall_s",
    "first_push_s",
    "first_push_mb_s",
    "stored_bytes",
    "cpu_s",
    "engine_cpu_s",
    "peak_rss_mb",
    "spooled_ahead_s",
)


def _run_method(name: str, hosts: list[str], repo: Path) -> float:
    """``name`` from the first of ``hosts`` (the public endpoint) to the rest; returns its first
    push's seconds."""
    args = (hosts[0], hosts[1:], repo) if name in ("ours", "engine", "built") else (hosts[0], hosts[1:])
    return float(LARGE_METHODS[name](*args))  # type: ignore[operator]


def engine_cpu_seconds() -> float:
    """CPU seconds the stack's dockerd has used so far (it compresses for `docker push` and
    streams `docker save`)."""
    pid = Path(os.environ["XPU_STACK_DIR"], "docker", "dockerd.pid").read_text().strip()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def measured_run(name: str, regions: int, storage: str, repo: Path, image_bytes: int) -> dict[str, float]:
    """One method in a process of its own, into empty registries: its figures (``FIGURES``)."""
    with fresh_registries(1 + regions, storage) as hosts, tempfile.TemporaryDirectory() as cache:
        ahead = prepare_spool(Path(cache)) if name == "built" else 0.0  # untimed: the build's share
        engine_before, started = engine_cpu_seconds(), time.monotonic()
        cmd = [sys.executable, __file__, "--one", name, "--hosts", ",".join(hosts), "--repo", str(repo)]
        env = {**os.environ, "XPU_BENCH_CACHE": cache}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, with its children
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            msg = f"{name} exited {proc.returncode}"
            raise SystemExit(msg)
        first = float(json.loads(out)["first_push_s"])
        return {
            "wall_s": wall,
            "first_push_s": first,
            "first_push_mb_s": image_bytes / 1e6 / first,
            "stored_bytes": hosts.stored_bytes(),
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "engine_cpu_s": engine_cpu_seconds() - engine_before,
            "peak_rss_mb": usage.ru_maxrss / 1024,
            "spooled_ahead_s": ahead,
        }


def estargz_layers() -> bool:
    """The bench image's own layers are eStargz (``large`` says so to every run's process)."""
    return os.environ.get("XPU_BENCH_ESTARGZ") == "1"


def estargz_image(ref: str) -> bool:
    """Whether ``ref`` (``[REPOSITORY/]IMAGE:VERSION``) is a release of this repository whose
    layers are eStargz (``image.yaml``'s ``layers``): its publish then writes them as eStargz."""
    from xpu_release.errors import ReleaseError
    from xpu_release.image.render import image_layers
    from xpu_release.manifest import Repo

    name, _, version = ref.rsplit("/", 1)[-1].partition(":")
    try:
        return image_layers(ROOT, Repo(ROOT).load(name, version)).estargz
    except ReleaseError:
        return False


def large(args: argparse.Namespace) -> None:
    """``--size`` or ``--image``: every method at the size users publish, with all its figures."""
    if args.image:
        sh("docker", "tag", args.image, IMAGE)  # the image as it is, under the bench's name
        if estargz_image(args.image):
            os.environ["XPU_BENCH_ESTARGZ"] = "1"  # for each run's process
            print(f"{args.image}: eStargz layers, published as its release publishes them")
    else:
        make_large_image(parse_size(args.size))
    import docker

    size = docker.from_env(version="auto").api.inspect_image(IMAGE)["Size"]
    if args.export:
        export_bound(args, size)
        return
    storage = args.storage or "disk"
    methods = args.methods.split(",") if args.methods else list(METHODS)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in methods}
    with tempfile.TemporaryDirectory() as tmp:
        repo = bench_repo(Path(tmp))
        for i in range(args.repeat):
            for name in methods:  # side by side, interleaved, each into empty registries
                figures = measured_run(name, 3, storage, repo, size)
                runs[name].append(figures)
                print(
                    f"run {i + 1} {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()),
                    flush=True,
                )
    med = {name: {k: statistics.median(r[k] for r in rs) for k in FIGURES} for name, rs in runs.items()}
    ratios = {
        f"{name}_vs_{peer}": med[name]["wall_s"] / med[peer]["wall_s"]
        for name in ("ours", "built") if name in med for peer in ("peer", "naive") if peer in med
    }  # fmt: skip
    print(
        f"image {size / 1e9:.2f} GB, public + 3 VPC regions, storage on {storage}, medians of {args.repeat}"
    )
    print(f"{'method':<7} {'wall':>7} {'1st push':>9} {'MB/s':>6} {'stored GB':>10} {'CPU s':>7} "
          f"{'dockerd s':>10} {'peak RSS':>9} {'spooled ahead':>14}")  # fmt: skip
    for name, m in med.items():
        print(f"{name:<7} {m['wall_s']:>6.1f}s {m['first_push_s']:>8.1f}s {m['first_push_mb_s']:>6.0f} "
              f"{m['stored_bytes'] / 1e9:>10.2f} {m['cpu_s']:>7.1f} {m['engine_cpu_s']:>10.1f} "
              f"{m['peak_rss_mb']:>7.0f}MB {m['spooled_ahead_s']:>13.1f}s")  # fmt: skip
    goal = GOALS["ours_vs_peer"] if args.image else GOALS_LARGE["ours_vs_peer"]  # #20's table
    goals = {k: goal for k in ratios if k.endswith("_vs_peer")}
    shown = ", ".join(f"{k.replace('_vs_', '/')} = {v:.2f}" for k, v in ratios.items())
    print(f"{shown} (goal: ≤ {goal} of peer)")
    report: dict[str, object] = {
        "image_bytes": size,
        "storage": storage,
        "repeat": args.repeat,
        "runs": runs,
        "median": med,
        "ratios": ratios,
        "goals_met": {k: ratios[k] <= v for k, v in goals.items()},
    }
    if args.image:
        report["image"] = args.image
        report["layers"] = "estargz" if estargz_layers() else "gzip"
    name = args.image.replace(":", "-").replace("/", "-") if args.image else args.size
    if args.methods:
        name += "-" + args.methods.replace(",", "-")
    write_results(f"publish-{name}.json", report)


def disk_written() -> int:
    """Bytes written to the machine's disks so far (/proc/diskstats: sectors written, whole disks)."""
    disks = {p.name for p in Path("/sys/block").iterdir() if not p.name.startswith(("loop", "zram", "ram"))}
    rows = (line.split() for line in Path("/proc/diskstats").read_text().splitlines())
    return sum(int(f[9]) * 512 for f in rows if f[2] in disks)


def export_once() -> dict[str, float]:
    """`docker save` of the bench image read and thrown away, as publish reads it when our build did
    not spool the layers: seconds to its first byte and to its last, the bytes, the disk writes
    and the CPU seconds of the engine meanwhile."""
    import docker

    api = docker.from_env(version="auto", timeout=600).api
    written, engine, started = disk_written(), engine_cpu_seconds(), time.monotonic()
    first, total = 0.0, 0
    for chunk in api.get_image(IMAGE, chunk_size=1 << 20):
        first = first or time.monotonic() - started
        total += len(chunk)
    return {
        "first_byte_s": first,
        "last_byte_s": time.monotonic() - started,
        "bytes": total,
        "disk_written_bytes": disk_written() - written,
        "engine_cpu_s": engine_cpu_seconds() - engine,
    }


def export_bound(args: argparse.Namespace, size: int) -> None:
    """``--export``: what bounds a publish of an image our build did not spool, measured."""
    runs = [export_once() for _ in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"docker save of a {size / 1e9:.2f} GB image, medians of {args.repeat}:")
    print(f"first byte {med['first_byte_s']:.1f} s, last byte {med['last_byte_s']:.1f} s, "
          f"{med['bytes'] / 1e9:.2f} GB; written to disk meanwhile {med['disk_written_bytes'] / 1e9:.2f} GB "
          f"({med['disk_written_bytes'] / 1e6 / med['first_byte_s']:.0f} MB/s before the first byte); "
          f"dockerd {med['engine_cpu_s']:.1f} CPU s")  # fmt: skip
    name = args.image.replace(":", "-").replace("/", "-") if args.image else args.size
    write_results(
        f"publish-{name}-export.json",
        {"image_bytes": size, "repeat": args.repeat, "runs": runs, "median": med},
    )


def write_results(name: str, report: dict[str, object]) -> None:
    out = ROOT / "bench" / "results" / name
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


def bench_repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    for name in ("templates", "schema"):
        shutil.copytree(ROOT / name, repo / name)
    shutil.copy(ROOT / "registries.yaml", repo)
    (repo / "manifests" / "bench-publish").mkdir(parents=True)
    (repo / "manifests" / "bench-publish" / "1.0.yaml").write_text(MANIFEST)
    return repo


def svg(sweep: dict[str, list[float]], path: Path) -> None:
    w, h, pad = 560, 340, 50
    top = max(max(v) for v in sweep.values()) * 1.1
    colours = {"naive": "#c0392b", "peer": "#2980b9", "engine": "#8e44ad", "ours": "#27ae60"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle">publish time against VPC regions</text>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - 20}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="30" x2="{pad}" y2="{h - pad}" stroke="black"/>']  # fmt: skip
    last = SWEEP[-1]

    def xy(i: int, v: float) -> tuple[float, float]:
        return pad + (SWEEP[i] - 1) * (w - pad - 40) / (last - 1), h - pad - v / top * (h - pad - 40)

    for i, n in enumerate(SWEEP):
        x, _ = xy(i, 0)
        parts.append(f'<text x="{x}" y="{h - pad + 18}" text-anchor="middle">{n}</text>')
    for k in range(5):
        v = top * k / 4
        _, y = xy(0, v)
        parts.append(f'<text x="{pad - 6}" y="{y + 4}" text-anchor="end">{v:.0f}s</text>')
    for j, (name, values) in enumerate(sweep.items()):
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(values)))
        parts.append(f'<polyline fill="none" stroke="{colours[name]}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{w - 120}" y="{50 + 16 * j}" fill="{colours[name]}">{name}</text>')
    parts.append(f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">VPC regions (plus one public)</text>')
    path.write_text("\n".join(parts) + "\n</svg>\n")


def main() -> None:  # noqa: C901  # a benchmark script's options, each a branch
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--payload-mb", type=int, default=200)
    parser.add_argument("--sweep", action="store_true", help=f"also {', '.join(map(str, SWEEP))} regions")
    parser.add_argument(
        "--regions-ratio",
        action="store_true",
        help="only ours, at 3 and at 12 regions, --repeat times each, interleaved (the 12/3 goal); "
        "and the floor beside it; writes bench/results/publish-regions-<storage>.json",
    )
    parser.add_argument(
        "--storage",
        choices=sorted(STORAGE),
        default=None,
        help="where the simulated registries keep blobs: memory (/dev/shm; the default) or disk "
        "(/tmp; the default with --size)",
    )
    parser.add_argument("--size", help="an image of about this size (e.g. 4GB), every figure per method")
    parser.add_argument("--image", help="an image the engine holds (REPOSITORY:TAG), every figure per method")
    parser.add_argument(
        "--methods",
        help="with --size/--image: these only, comma-separated, of naive, peer, engine, ours (the "
        "default: all four) and built (ours with every blob spooled ahead, as after our build)",
    )
    parser.add_argument(
        "--export",
        action="store_true",
        help="with --size/--image: only time `docker save` of the image (first byte, last byte, disk "
        "writes, dockerd CPU), what a publish of layers our build did not spool waits for",
    )
    parser.add_argument("--one", choices=sorted(LARGE_METHODS), help=argparse.SUPPRESS)  # a run's own process
    parser.add_argument("--hosts", help=argparse.SUPPRESS)
    parser.add_argument("--repo", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps({"first_push_s": _run_method(args.one, args.hosts.split(","), args.repo)}))
        return
    if args.size or args.image:
        large(args)
        return
    args.storage = args.storage or "memory"
    make_image(args.payload_mb)
    import docker

    size = docker.from_env(version="auto").api.inspect_image(IMAGE)["Size"]
    results: dict[str, object] = {"image_bytes": size, "repeat": args.repeat, "storage": args.storage}
    with tempfile.TemporaryDirectory() as tmp:
        repo = bench_repo(Path(tmp))

        storage = args.storage

        def measure(name: str, regions: int) -> float:
            with fresh_registries(1 + regions, storage) as hosts:
                started = time.monotonic()
                _run_method(name, hosts, repo)
                return time.monotonic() - started

        if args.regions_ratio:
            blobs = compressed_blobs(repo, storage)

            def measure_floor(regions: int) -> float:
                with fresh_registries(1 + regions, storage) as hosts:
                    started = time.monotonic()
                    floor(hosts, blobs)
                    return time.monotonic() - started

            counts = (3, 12)
            by_n: dict[str, dict[int, list[float]]] = {"ours": {n: [] for n in counts},
                                                       "floor": {n: [] for n in counts}}  # fmt: skip
            for _ in range(args.repeat):
                for n in counts:
                    by_n["ours"][n].append(measure("ours", n))
                    by_n["floor"][n].append(measure_floor(n))
                    last = {k: v[n][-1] for k, v in by_n.items()}
                    print(f"{n} regions: ours {last['ours']:.1f} s, floor {last['floor']:.1f} s", flush=True)
            medians = {k: {n: statistics.median(v[n]) for n in counts} for k, v in by_n.items()}
            ratio = medians["ours"][12] / medians["ours"][3]
            print(
                f"storage: {storage}; image {size / 1e6:.0f} MB, "
                f"{sum(b.stat().st_size for b in blobs) / 1e6:.0f} MB compressed; medians of {args.repeat}"
            )
            print(f"{'':<7} {'3 regions':>10} {'12 regions':>11} {'12/3':>6}")
            for k, m in medians.items():
                print(f"{k:<7} {m[3]:>9.1f}s {m[12]:>10.1f}s {m[12] / m[3]:>6.2f}")
            added = {n: medians["ours"][n] - medians["floor"][n] for n in counts}
            print(f"ours - floor: {added[3]:.1f} s at 3 regions, {added[12]:.1f} s at 12; "
                  f"ours 12/3 = {ratio:.2f} (goal ≤ {GOALS['twelve_vs_three_regions']})")  # fmt: skip
            report: dict[str, object] = {
                "image_bytes": size,
                "storage": storage,
                "repeat": args.repeat,
                "runs_s": by_n,
                "median_s": medians,
                "ours_minus_floor_s": added,
                "twelve_vs_three_regions": ratio,
                "goal_met": ratio <= GOALS["twelve_vs_three_regions"],
            }
            write_results(f"publish-regions-{storage}.json", report)
            return
        runs: dict[str, list[float]] = {name: [] for name in METHODS}
        for _ in range(args.repeat):
            for name in METHODS:  # side by side, interleaved, each into empty registries
                runs[name].append(measure(name, 3))
        med = {k: statistics.median(v) for k, v in runs.items()}
        results["three_regions"] = {"runs_s": runs, "median_s": med}
        ratios = {"ours_vs_naive": med["ours"] / med["naive"], "ours_vs_peer": med["ours"] / med["peer"]}
        results["ratios"] = ratios
        results["goals_met"] = {k: ratios[k] <= v for k, v in GOALS.items() if k in ratios}
        print(f"image {size / 1e6:.0f} MB, public + 3 VPC regions, median of {args.repeat}")
        print(f"{'method':<8} {'median':>9} {'runs':>30}")
        for name, values in runs.items():
            print(f"{name:<8} {med[name]:>8.1f}s {' '.join(f'{v:.1f}' for v in values):>30}")
        print(f"ours/naive = {ratios['ours_vs_naive']:.2f} (goal ≤ {GOALS['ours_vs_naive']}), "
              f"ours/peer = {ratios['ours_vs_peer']:.2f} (goal ≤ {GOALS['ours_vs_peer']})")  # fmt: skip
        if args.sweep:
            sweep: dict[str, list[float]] = {name: [] for name in METHODS}
            for n in SWEEP:
                for name in METHODS:
                    sweep[name].append(measure(name, n))
                print(f"{n} regions: " + ", ".join(f"{k} {v[-1]:.1f}s" for k, v in sweep.items()))
            results["sweep_s"] = sweep
            results["sweep_regions"] = list(SWEEP)
            twelve = sweep["ours"][SWEEP.index(12)] / sweep["ours"][SWEEP.index(3)]
            results["ratios"]["twelve_vs_three_regions"] = twelve  # type: ignore[index]
            results["goals_met"]["twelve_vs_three_regions"] = twelve <= GOALS["twelve_vs_three_regions"]  # type: ignore[index]
            print(f"ours, 12 regions / 3 regions = {twelve:.2f} (goal ≤ {GOALS['twelve_vs_three_regions']})")
            svg(sweep, ROOT / "bench" / "results" / "publish.svg")
    write_results("publish.json", results)


if __name__ == "__main__":
    main()
