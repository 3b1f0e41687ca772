"""From pull to the first training step: lazy (eStargz through containerd's stargz snapshotter)
against a full pull and run, through a loopback proxy capped at VPC and public bandwidth.

    ci/release-local.sh && ci/local-stack.sh lazy && eval "$(ci/local-stack.sh env)" && python bench/pull.py

What is timed, each trial from nothing (fresh containerd and snapshotter, empty roots): the pull
of the image and a container of it running `xpu-bench --steps 1 --warmup-steps 0` (Python
starts, imports torch, builds the model, takes one training step, prints its line), to its
exit. Three ways, interleaved (their order rotated each trial):

- lazy: `ctr-remote image rpull` (the snapshotter mounts each eStargz layer, fetching the
  profile's files first) then `ctr run --snapshotter stargz`: the rest is fetched as it is read;
- full: `ctr image pull` (every byte fetched and unpacked with overlayfs) then `ctr run`, of
  the same eStargz image: what every puller that is not lazy does;
- gzip: the same, of the gzip twin of the release (the same files, each layer a plain gzip of
  them, the landmark and TOC left out): what the release would cost without eStargz.

Images: the release on the stack (training-cpu-pytorch:25.03, its SDK below it) and a 4 GB
variant (the release plus a layer of random files the workload never reads, as an SDK's bulk),
each in both forms, pushed to the stack's cn-beijing registry outside the timing. Rates: 100
MB/s (a VPC endpoint) and 25 MB/s (the public one), a token bucket on the proxy's answers. The
bytes the proxy carried are counted per trial. The snapshotter runs with background fetching off
(upstream's ``no_background_fetch``, which the stack's daemon takes as ``-no-background-fetch``):
with it on, it downloads every mounted layer whole beside the reads the workload waits for, and a
trial at 100 MB/s fetched 1.36 GB of a 2 GB variant before the first step (``--background-fetch``
measures that way).

``--docker`` times instead what the done-means of a plain puller asks: `docker pull` of the
eStargz release against its gzip twin, each into a Docker engine of the trial's own (started
empty, its own root and bridge), interleaved, through the same proxy (writes
bench/results/pull-docker.json):

    python bench/pull.py --docker --rates 100

The machine is not made quiet: other work on it slows every way alike, and the interval says
how much the figures moved. Prints a table and writes bench/results/pull.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib import request

from isal import igzip

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = "127.0.0.1:15002"  # the stack's cn-beijing region: plain HTTP, no auth
COMMAND = ["xpu-bench", "--steps", "1", "--warmup-steps", "0"]
WAYS = ("lazy", "full", "gzip")
MB = 1_000_000


# --- the registry, plainly ---------------------------------------------------------------------


def _get(path: str, accept: str = "") -> bytes:
    req = request.Request(f"http://{REGISTRY}{path}", headers={"Accept": accept} if accept else {})
    with request.urlopen(req, timeout=600) as resp:
        return bytes(resp.read())


def _put_blob(repo: str, path: Path | bytes) -> tuple[str, int]:
    data = path if isinstance(path, bytes) else None
    sha = hashlib.sha256()
    size = 0
    if data is None:
        assert isinstance(path, Path)
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                sha.update(chunk)
                size += len(chunk)
    else:
        sha.update(data)
        size = len(data)
    digest = "sha256:" + sha.hexdigest()
    head = request.Request(f"http://{REGISTRY}/v2/{repo}/blobs/{digest}", method="HEAD")
    with contextlib.suppress(Exception), request.urlopen(head, timeout=60):
        return digest, size
    start = request.Request(f"http://{REGISTRY}/v2/{repo}/blobs/uploads/", method="POST", data=b"")
    with request.urlopen(start, timeout=60) as resp:
        location = resp.headers["Location"]
    url = location if location.startswith("http") else f"http://{REGISTRY}{location}"
    url += ("&" if "?" in url else "?") + f"digest={digest}"
    body: Any = data if data is not None else path.open("rb")  # type: ignore[union-attr]
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
    put = request.Request(url, method="PUT", data=body, headers=headers)
    with request.urlopen(put, timeout=3600):
        pass
    return digest, size


def _put_manifest(repo: str, tag: str, manifest: dict[str, Any]) -> str:
    body = json.dumps(manifest).encode()
    req = request.Request(f"http://{REGISTRY}/v2/{repo}/manifests/{tag}", method="PUT", data=body,
                          headers={"Content-Type": manifest["mediaType"]})  # fmt: skip
    with request.urlopen(req, timeout=60):
        pass
    return "sha256:" + hashlib.sha256(body).hexdigest()


OCI = "application/vnd.oci.image.manifest.v1+json"


def _manifest(repo: str, tag: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_get(f"/v2/{repo}/manifests/{tag}", OCI))
    return doc


# --- the images ----------------------------------------------------------------------------------


@dataclass
class Image:
    name: str  # as the table says it
    refs: dict[str, str]  # way's form ("estargz", "gzip") → the ref at REGISTRY
    sizes: dict[str, int] = field(default_factory=dict)  # form → compressed bytes


def _gzip_twin(repo: str, manifest: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """The same image with every eStargz layer as a plain gzip of its files (landmarks and TOC
    out), its config's diff_ids made anew; pushed to ``repo``. A layer without a TOC is kept."""
    from xpu_release.oci.estargz import (
        NO_PREFETCH_LANDMARK,
        PREFETCH_LANDMARK,
        TOC_DIGEST_ANNOTATION,
        TOC_NAME,
    )

    config = json.loads(_get(f"/v2/{repo}/blobs/{manifest['config']['digest']}"))
    layers, diff_ids = [], []
    for i, layer in enumerate(manifest["layers"]):
        if TOC_DIGEST_ANNOTATION not in (layer.get("annotations") or {}):
            layers.append(layer)
            diff_ids.append(config["rootfs"]["diff_ids"][i])
            continue
        src, plain = tmp / "src.tar.gz", tmp / "plain.tar"
        src.write_bytes(_get(f"/v2/{repo}/blobs/{layer['digest']}"))
        with tarfile.open(src, "r:gz") as tin, plain.open("wb") as raw, \
                tarfile.open(fileobj=raw, mode="w|", format=tarfile.PAX_FORMAT) as tout:  # fmt: skip
            for m in tin:
                if m.name in (TOC_NAME, PREFETCH_LANDMARK, NO_PREFETCH_LANDMARK):
                    continue
                tout.addfile(m, tin.extractfile(m) if m.isreg() else None)
        diff_ids.append("sha256:" + hashlib.sha256(plain.read_bytes()).hexdigest())
        packed = tmp / "plain.tar.gz"
        with plain.open("rb") as fin, igzip.IGzipFile(packed, "wb", compresslevel=2, mtime=0) as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)  # as a gzip release's layers are: ISA-L, level 2
        digest, size = _put_blob(repo, packed)
        layers.append({"mediaType": layer["mediaType"], "digest": digest, "size": size})
    config["rootfs"]["diff_ids"] = diff_ids
    cdigest, csize = _put_blob(repo, json.dumps(config).encode())
    return {**manifest, "config": {**manifest["config"], "digest": cdigest, "size": csize}, "layers": layers}


def _bulk_layer(tmp: Path, size: int, form: str) -> tuple[Path, str, dict[str, str]]:
    """A layer of random files (64 MB each) under /opt/bulk, ``size`` bytes in all: its blob,
    its diff_id and its annotations (eStargz: written by our writer; gzip: plain)."""
    from xpu_release.oci import estargzwrite
    from xpu_release.oci.codec import DEFAULT

    tar_path = tmp / "bulk.tar"
    rng = random.Random(7)
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        folder = tarfile.TarInfo("opt/bulk")
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, 946684800
        tar.addfile(folder)
        left, n = size, 0
        while left > 0:
            part = min(left, 64 * MB)
            info = tarfile.TarInfo(f"opt/bulk/part-{n:03d}.bin")
            info.size, info.mode, info.mtime = part, 0o644, 946684800
            tar.addfile(info, io.BytesIO(rng.randbytes(part)))
            left, n = left - part, n + 1
    blob = tmp / f"bulk.{form}"
    if form == "gzip":
        with tar_path.open("rb") as fin, igzip.IGzipFile(blob, "wb", compresslevel=2, mtime=0) as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        return blob, "sha256:" + hashlib.sha256(tar_path.read_bytes()).hexdigest(), {}
    with tar_path.open("rb") as src, (tmp / "bulk.estargz.tar").open("wb") as out, blob.open("wb") as bout, \
            ThreadPoolExecutor(2) as pool:  # fmt: skip
        made = estargzwrite.write(src, out, bout, codec=DEFAULT, pool=pool)
    return blob, made.diff_id, made.annotations()


def _with_layer(
    repo: str, manifest: dict[str, Any], blob: Path, diff_id: str, notes: dict[str, str]
) -> dict[str, Any]:
    config = json.loads(_get(f"/v2/{repo}/blobs/{manifest['config']['digest']}"))
    config["rootfs"]["diff_ids"].append(diff_id)
    config.setdefault("history", []).append({"created_by": "bench/pull.py: bulk the workload never reads"})
    digest, size = _put_blob(repo, blob)
    cdigest, csize = _put_blob(repo, json.dumps(config).encode())
    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": size}
    if notes:
        layer["annotations"] = notes
    return {**manifest, "config": {**manifest["config"], "digest": cdigest, "size": csize},
            "layers": [*manifest["layers"], layer]}  # fmt: skip


def prepare(source: str, variant_bytes: int, tmp: Path) -> list[Image]:
    """The release (both forms) and its 4 GB variant (both forms) at REGISTRY, in a namespace of
    the bench's own."""
    repo_of, tag = source.rsplit(":", 1)
    ns = "pull" + uuid.uuid4().hex[:8]
    repo = f"{ns}/{repo_of.rsplit('/', 1)[-1]}"
    lazy = _manifest(repo_of, tag)
    # The release's blobs into the bench's repository (a mount would do; a copy is as good here).
    for d in [lazy["config"], *lazy["layers"]]:
        data = _get(f"/v2/{repo_of}/blobs/{d['digest']}")
        (tmp / "blob").write_bytes(data)
        _put_blob(repo, tmp / "blob")
    twin = _gzip_twin(repo, lazy, tmp)
    images = [Image("release", {"estargz": f"{REGISTRY}/{repo}:estargz", "gzip": f"{REGISTRY}/{repo}:gzip"})]
    _put_manifest(repo, "estargz", lazy)
    _put_manifest(repo, "gzip", twin)
    big = {}
    for form, base in (("estargz", lazy), ("gzip", twin)):
        have = sum(int(d["size"]) for d in base["layers"])
        blob, diff_id, notes = _bulk_layer(tmp, max(0, variant_bytes - have), form)
        _put_manifest(repo, f"big-{form}", _with_layer(repo, base, blob, diff_id, notes))
        big[form] = f"{REGISTRY}/{repo}:big-{form}"
    images.append(Image(f"{variant_bytes / 1e9:.0f} GB variant", big))
    for image in images:
        for form, ref in image.refs.items():
            m = _manifest(repo, ref.rsplit(":", 1)[1])
            image.sizes[form] = sum(int(d["size"]) for d in m["layers"])
    return images


# --- the bandwidth cap -------------------------------------------------------------------------


class Proxy:
    """A loopback TCP proxy to REGISTRY whose answers pass a token bucket of ``rate`` bytes a
    second (bursts of 256 KiB); it counts the bytes it carried back."""

    def __init__(self, rate: float) -> None:
        self.rate, self.carried = rate, 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._tokens, self._stamp = 0.0, time.monotonic()
        self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _take(self, n: int) -> None:
        burst = 256 << 10
        while True:
            now = time.monotonic()
            self._tokens = min(burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= n:
                self._tokens -= n
                return
            await asyncio.sleep((n - self._tokens) / self.rate)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = REGISTRY.split(":")
        up_r, up_w = await asyncio.open_connection(host, int(port))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, capped: bool) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(64 << 10):
                    if capped:
                        await self._take(len(data))
                        self.carried += len(data)
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_w, False), pipe(up_r, writer, True))

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


# --- fresh daemons ------------------------------------------------------------------------------


@contextlib.contextmanager
def daemons(stack: Path, background: bool) -> Iterator[Path]:
    """A snapshotter and a containerd of this trial's own, from nothing; their socket."""
    base = Path(tempfile.mkdtemp(prefix="bench-pull-", dir=stack / "lazy"))
    sn_sock, sock = base / "stargz.sock", base / "containerd.sock"
    config = base / "containerd.toml"
    config.write_text(
        f'version = 2\nroot = "{base}/root"\nstate = "{base}/state"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{sock}.ttrpc"\n'
        f'[proxy_plugins.stargz]\n  type = "snapshot"\n  address = "{sn_sock}"\n'
    )
    log = (base / "daemons.log").open("wb")
    daemon = [
        str(stack / "lazy" / "bin" / "stargz-snapshotter"),
        "-root",
        str(base / "stargz"),
        "-address",
        str(sn_sock),
    ]
    snap = subprocess.Popen(daemon, stdout=log, stderr=log, start_new_session=True)
    ctrd = subprocess.Popen(
        ["containerd", "--config", str(config)], stdout=log, stderr=log, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not _ready(sock):
            if time.monotonic() > deadline:
                sys.exit(f"containerd with the snapshotter did not start: {base / 'daemons.log'}")
            time.sleep(0.2)
        yield sock
    finally:
        _stop([ctrd, snap], base)


def _stop(procs: list[subprocess.Popen[bytes]], base: Path) -> None:
    """A trial's daemons stopped (killed if they linger), their mounts let go, their folder gone."""
    for proc in procs:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for line in reversed(Path("/proc/self/mountinfo").read_text().splitlines()):
        point = line.split()[4]
        if point.startswith(str(base) + "/"):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


def _ready(sock: Path) -> bool:
    out = subprocess.run(["ctr", "--address", str(sock), "plugins", "ls"], capture_output=True, text=True,
                         check=False)  # fmt: skip
    return any(
        line.split()[1:2] == ["stargz"] and line.split()[-1] == "ok" for line in out.stdout.splitlines()
    )


def trial(stack: Path, ref: str, way: str, rate: float, background: bool) -> tuple[float, int]:
    """Seconds from the pull's start to the end of the first step, and the bytes fetched."""
    proxy = Proxy(rate)
    try:
        with daemons(stack, background) as sock:
            via = ref.replace(REGISTRY, f"127.0.0.1:{proxy.port}")
            ctr = ["ctr", "--address", str(sock)]
            started = time.monotonic()
            if way == "lazy":
                pull = ["ctr-remote", "--address", str(sock), "image", "rpull", "--plain-http", via]
                run = [
                    *ctr,
                    "run",
                    "--rm",
                    "--snapshotter",
                    "stargz",
                    via,
                    f"b{uuid.uuid4().hex[:8]}",
                    *COMMAND,
                ]
            else:
                pull = [*ctr, "image", "pull", "--plain-http", via]
                run = [*ctr, "run", "--rm", via, f"b{uuid.uuid4().hex[:8]}", *COMMAND]
            for argv in (pull, run):
                done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
                if done.returncode != 0:
                    sys.exit(f"{' '.join(argv[:6])} failed:\n{done.stderr[-2000:]}")
            if '"workload"' not in done.stdout:
                sys.exit(f"the workload printed no line:\n{done.stdout[-1000:]}")
            return time.monotonic() - started, proxy.carried
    finally:
        proxy.close()


BENCH_NET = "192.168.213.1/24"  # assumed: a private range nothing else on this machine uses


@contextlib.contextmanager
def engine(stack: Path) -> Iterator[str]:
    """A Docker engine of this trial's own, from nothing (its own root, no iptables rules); its
    DOCKER_HOST. Its default network is a bridge of its own, made here and removed after: a
    dockerd told ``--bridge none`` deletes the machine's ``docker0`` as it starts, which takes
    the stack's engine's network away (it did, 2026-12-07)."""
    base = Path(tempfile.mkdtemp(prefix="bench-docker-", dir=stack / "lazy"))
    host = f"unix://{base}/docker.sock"
    bridge = f"xpb{uuid.uuid4().hex[:8]}"  # an interface name of at most 15 characters
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "add", BENCH_NET, "dev", bridge], check=True)
    log = (base / "dockerd.log").open("wb")
    argv = [
        "dockerd", "--host", host, "--data-root", str(base / "data"), "--exec-root", str(base / "exec"),
        "--pidfile", str(base / "dockerd.pid"), "--storage-driver", "overlay2", "--bridge", bridge,
        "--iptables=false", "--ip-masq=false",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["docker", "-H", host, "info"], capture_output=True, check=False).returncode:
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit(f"a bench dockerd did not start: {base / 'dockerd.log'}")
            time.sleep(0.3)
        yield host
    finally:
        _stop([proc], base)
        subprocess.run(["ip", "link", "del", bridge], check=False, capture_output=True)


def docker_trial(stack: Path, ref: str, rate: float) -> tuple[float, int]:
    """Seconds of a plain `docker pull` of ``ref`` into an empty engine, and the bytes fetched."""
    proxy = Proxy(rate)
    try:
        with engine(stack) as host:
            via = ref.replace(REGISTRY, f"127.0.0.1:{proxy.port}")  # loopback: plain HTTP is allowed
            started = time.monotonic()
            done = subprocess.run(["docker", "-H", host, "pull", "-q", via], capture_output=True, text=True,
                                  check=False, timeout=3600)  # fmt: skip
            seconds = time.monotonic() - started
            if done.returncode != 0:
                sys.exit(f"docker pull {via} failed:\n{done.stderr[-2000:]}")
            return seconds, proxy.carried
    finally:
        proxy.close()


def docker_rows(stack: Path, images: list[Image], rates: list[float], trials: int) -> list[dict[str, Any]]:
    """A plain `docker pull` of the eStargz release against its gzip twin, interleaved."""
    rows: list[dict[str, Any]] = []
    for rate in rates:
        for image in images:
            got: dict[str, list[tuple[float, int]]] = {"estargz": [], "gzip": []}
            for n in range(trials):
                for form in ("estargz", "gzip") if n % 2 == 0 else ("gzip", "estargz"):
                    got[form].append(docker_trial(stack, image.refs[form], rate))
                    seconds, carried = got[form][-1]
                    print(f"  {image.name} at {rate / MB:.0f} MB/s, trial {n + 1}: docker pull {form} "
                          f"{seconds:.1f} s, {carried / MB:.0f} MB", flush=True)  # fmt: skip
            ratios = [a[0] / b[0] for a, b in zip(got["estargz"], got["gzip"], strict=True)]
            rows.append({
                "image": image.name, "rate_mb_s": rate / MB, "trials": trials,
                "seconds": {f: [round(t, 2) for t, _ in got[f]] for f in got},
                "bytes": {f: [b for _, b in got[f]] for f in got},
                "compressed_bytes": image.sizes,
                "estargz_over_gzip": round(statistics.median(ratios), 3),
                "estargz_over_gzip_interval": [round(x, 3) for x in interval(ratios)],
                "estargz_bytes_over_gzip": round(image.sizes["estargz"] / image.sizes["gzip"], 3),
            })  # fmt: skip
    print(
        f"\n{'image':<16} {'MB/s':>5} {'estargz s':>10} {'gzip s':>8} {'estargz/gzip [95%]':>24} {'bytes':>6}"
    )
    for r in rows:
        med = {f: statistics.median(r["seconds"][f]) for f in ("estargz", "gzip")}
        lo, hi = r["estargz_over_gzip_interval"]
        ratio, size = r["estargz_over_gzip"], r["estargz_bytes_over_gzip"]
        print(f"{r['image']:<16} {r['rate_mb_s']:>5.0f} {med['estargz']:>10.1f} {med['gzip']:>8.1f} "
              f"{ratio:>10.2f} [{lo:.2f}, {hi:.2f}] {size:>6.2f}")  # fmt: skip
    return rows


# --- the figures ------------------------------------------------------------------------------


def interval(ratios: list[float]) -> tuple[float, float]:
    """A 95 % bootstrap interval of the median ratio."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    return meds[50], meds[1949]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--source", default="egslingjun/training-cpu-pytorch:25.03",
                        help="the release at the stack's cn-beijing registry (REPO:TAG)")  # fmt: skip
    parser.add_argument("--rates", default="100,25", help="MB/s, comma-separated")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--variant-gb", type=float, default=4.0)
    parser.add_argument(
        "--background-fetch", action="store_true", help="the snapshotter's background fetch on"
    )
    parser.add_argument(
        "--docker", action="store_true",
        help="time a plain `docker pull` of the eStargz release against its gzip twin instead "
        "(a fresh engine each trial; writes bench/results/pull-docker.json)",
    )  # fmt: skip
    parser.add_argument("--out", default=None, help="bench/results/pull.json (pull-docker.json)")
    args = parser.parse_args()
    out = Path(args.out or ROOT / "bench" / "results" / ("pull-docker.json" if args.docker else "pull.json"))
    stack = Path(os.environ.get("XPU_STACK_DIR") or sys.exit('run: eval "$(ci/local-stack.sh env)"'))
    if not (stack / "lazy" / "bin" / "stargz-snapshotter").is_file():
        sys.exit("the snapshotter is not built: run ci/local-stack.sh lazy")
    with tempfile.TemporaryDirectory(prefix="bench-pull-", dir=stack) as tmp:
        images = prepare(args.source, int(args.variant_gb * 1e9), Path(tmp))
    if args.docker:
        docker = docker_rows(stack, images, [float(r) * MB for r in args.rates.split(",")], args.trials)
        out.write_text(json.dumps({"command": ["docker", "pull"], "rows": docker}, indent=2) + "\n")
        print(f"\nwrote {out}")
        return
    rows: list[dict[str, Any]] = []
    for rate in (float(r) * MB for r in args.rates.split(",")):
        for image in images:
            got: dict[str, list[tuple[float, int]]] = {w: [] for w in WAYS}
            for n in range(args.trials):
                for way in WAYS[n % 3 :] + WAYS[: n % 3]:
                    ref = image.refs["gzip" if way == "gzip" else "estargz"]
                    got[way].append(trial(stack, ref, way, rate, args.background_fetch))
                    print(f"  {image.name} at {rate / MB:.0f} MB/s, trial {n + 1}: {way} "
                          f"{got[way][-1][0]:.1f} s, {got[way][-1][1] / MB:.0f} MB", flush=True)  # fmt: skip
            lazy_full = [a[0] / b[0] for a, b in zip(got["lazy"], got["full"], strict=True)]
            full_gzip = [a[0] / b[0] for a, b in zip(got["full"], got["gzip"], strict=True)]
            rows.append({
                "image": image.name, "rate_mb_s": rate / MB, "trials": args.trials,
                "seconds": {w: [round(t, 2) for t, _ in got[w]] for w in WAYS},
                "bytes": {w: [b for _, b in got[w]] for w in WAYS},
                "compressed_bytes": image.sizes,
                "lazy_over_full": round(statistics.median(lazy_full), 3),
                "lazy_over_full_interval": [round(x, 3) for x in interval(lazy_full)],
                "estargz_full_over_gzip": round(statistics.median(full_gzip), 3),
                "estargz_full_over_gzip_interval": [round(x, 3) for x in interval(full_gzip)],
                "estargz_bytes_over_gzip": round(image.sizes["estargz"] / image.sizes["gzip"], 3),
            })  # fmt: skip
    print(f"\n{'image':<16} {'MB/s':>5} {'lazy s':>8} {'full s':>8} {'gzip s':>8} {'lazy/full [95%]':>22} "
          f"{'lazy MB':>8} {'full/gzip':>10} {'bytes':>6}")  # fmt: skip
    for r in rows:
        med = {w: statistics.median(r["seconds"][w]) for w in WAYS}
        lo, hi = r["lazy_over_full_interval"]
        lazy_mb = statistics.median(r["bytes"]["lazy"]) / MB
        print(f"{r['image']:<16} {r['rate_mb_s']:>5.0f} {med['lazy']:>8.1f} {med['full']:>8.1f} "
              f"{med['gzip']:>8.1f} {r['lazy_over_full']:>8.2f} [{lo:.2f}, {hi:.2f}] {lazy_mb:>8.0f} "
              f"{r['estargz_full_over_gzip']:>10.2f} {r['estargz_bytes_over_gzip']:>6.2f}")  # fmt: skip
    doc = {"command": COMMAND, "background_fetch": args.background_fetch, "rows": rows}
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
