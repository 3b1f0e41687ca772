"""Lazy pulling on the real stack (``ci/local-stack.sh lazy``: containerd with the stargz
snapshotter): an eStargz image made with the project's own writer (the stack's base layer
converted, plus a layer with a 32 MiB file) is pushed to 127.0.0.1:15002, pulled with
``ctr-remote image rpull`` through a byte-counting proxy and run. The command's output is right,
its layers are FUSE mounts of the snapshotter, the digest containerd resolved is the one pushed,
and far fewer bytes came over than the 32 MiB file. Counter-checks: the same image pulled the
plain way (overlayfs) fetches every byte of it, and a plain gzip image is not mounted lazily
(the snapshotter falls back to an unpack of the whole blob)."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import io
import json
import os
import secrets
import shlex
import shutil
import subprocess
import tarfile
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.request import ProxyHandler, Request, build_opener

import pytest

from xpu_release.oci import codec, estargzwrite

from ..needs import ROOT, missing

pytestmark = pytest.mark.integration

HUB, REGISTRY = "127.0.0.1:15000", "127.0.0.1:15002"
BASE_REPO, BASE_TAG = "base/debian/bookworm-python", "12"
BIG = 32 << 20
COMMAND = ["python3", "-c", 'print(open("/data/small.txt").read(), end="")']
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEXES = "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json"
HOP = {"host", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}
_http = build_opener(ProxyHandler({}))  # loopback only, whatever proxy the environment names


# -- the stack's lazy side ---------------------------------------------------------------------


@dataclass(frozen=True)
class Lazy:
    socket: str
    snapshotter_root: Path

    def ctr(self, *args: str, tool: str = "ctr", timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [tool, "--address", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def fuse_mounts(self) -> list[Path]:
        """The snapshotter's FUSE mounts (each one a layer mounted lazily), from mountinfo."""
        mounts = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields, _, tail = line.partition(" - ")
            fstype, source = tail.split()[:2]
            point = Path(fields.split()[4])
            if (
                fstype.startswith("fuse")
                and source == "stargz"
                and point.is_relative_to(self.snapshotter_root)
            ):
                mounts.append(point)
        return mounts


@pytest.fixture(scope="session")
def lazy() -> Lazy:
    """The stack's containerd with the stargz snapshotter, started on demand (idempotent)."""
    if os.geteuid() != 0 or not shutil.which("ctr"):
        missing("lazy pulling needs root and containerd's ctr: run ci/local-stack.sh lazy as root")
    started = subprocess.run(
        [str(ROOT / "ci" / "local-stack.sh"), "lazy"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if started.returncode != 0:
        missing(f"ci/local-stack.sh lazy failed:\n{started.stderr[-3000:]}")
    env = dict(line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines())
    return Lazy(env["XPU_LAZY_CONTAINERD"], Path(env["XPU_LAZY_SNAPSHOTTER_ROOT"]))


# -- a byte-counting proxy in front of the registry ----------------------------------------------


class CountingProxy:
    """Forwards every request to the registry and counts the body bytes it answers, per path."""

    def __init__(self, upstream: str) -> None:
        self.served: Counter[str] = Counter()
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as containerd expects

            def do_GET(self) -> None:
                conn = http.client.HTTPConnection(upstream, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                conn.request(self.command, self.path, headers=headers)  # Range included
                resp = conn.getresponse()
                whole = resp.read() if resp.getheader("Content-Length") is None else None  # chunked
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP:
                        self.send_header(k, v)
                if whole is not None:
                    self.send_header("Content-Length", str(len(whole)))
                self.end_headers()
                while self.command != "HEAD" and (
                    chunk := whole if whole is not None else resp.read(1 << 16)
                ):
                    self.wfile.write(chunk)
                    with lock:
                        proxy.served[self.path.split("?")[0]] += len(chunk)
                    whole = b"" if whole is not None else None
                conn.close()

            do_HEAD = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def blob_bytes(self, digest: str) -> int:
        return sum(n for path, n in self.served.items() if path.endswith(f"/blobs/{digest}"))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy() -> Iterator[CountingProxy]:
    p = CountingProxy(REGISTRY)
    yield p
    p.close()


# -- images: the base's layer as eStargz plus a layer of our own ---------------------------------


def _get(url: str, accept: str = "*/*") -> bytes:
    with _http.open(Request(url, headers={"Accept": accept}), timeout=120) as resp:
        body: bytes = resp.read()
    return body


def _push_blob(repo: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    started = _http.open(Request(f"http://{REGISTRY}/v2/{repo}/blobs/uploads/", method="POST"), timeout=60)
    location = started.headers["Location"]
    url = location if location.startswith("http") else f"http://{REGISTRY}{location}"
    url += ("&" if "?" in url else "?") + f"digest={digest}"
    put = Request(url, data=data, method="PUT", headers={"Content-Type": "application/octet-stream"})
    with _http.open(put, timeout=300) as resp:
        assert resp.status == 201
    return digest


def _push_manifest(repo: str, tag: str, manifest: dict[str, Any]) -> str:
    body = json.dumps(manifest).encode()
    put = Request(f"http://{REGISTRY}/v2/{repo}/manifests/{tag}", data=body, method="PUT")
    put.add_header("Content-Type", OCI_MANIFEST)
    with _http.open(put, timeout=60) as resp:
        assert resp.status == 201
    return "sha256:" + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class Layer:
    blob: bytes
    diff_id: str
    annotations: dict[str, str]


@dataclass(frozen=True)
class Image:
    ref_path: str  # <namespace>/<name>:<tag>, on REGISTRY (or a proxy in front of it)
    digest: str
    big_layer: str  # the blob digest of the layer with the 32 MiB file
    big_layer_size: int
    marker: str  # a file only this image's own layer holds


class _Discard:
    def write(self, data: bytes, /) -> int:
        return len(data)


def _estargz(tar: Path, prefetch: tuple[str, ...] = ()) -> Layer:
    with tar.open("rb") as source, ThreadPoolExecutor(2) as pool:
        blob_path = tar.with_suffix(".estargz")
        with blob_path.open("wb") as out:
            w = estargzwrite.write(source, _Discard(), out, codec=codec.DEFAULT, pool=pool, prefetch=prefetch)
    blob = blob_path.read_bytes()
    assert ("sha256:" + hashlib.sha256(blob).hexdigest(), len(blob)) == (w.blob_digest, w.blob_size)
    return Layer(blob, w.diff_id, w.annotations())


def _own_layer(tmp: Path, text: str, marker: str) -> Path:
    """/data/small.txt (what the command prints), /data/big.bin (32 MiB random: no compression
    hides it), and a marker file naming this image."""
    tar = tmp / f"{marker}.tar"
    with tarfile.open(tar, "w", format=tarfile.PAX_FORMAT) as t:
        folder = tarfile.TarInfo("data")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        t.addfile(folder)
        for name, data in (("small.txt", text.encode()), ("big.bin", os.urandom(BIG)), (marker, b"")):
            info = tarfile.TarInfo(f"data/{name}")
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    return tar


def _push_image(repo: str, base_config: dict[str, Any], layers: list[Layer]) -> str:
    config = {k: v for k, v in base_config.items() if k not in ("history", "container", "container_config")}
    config["rootfs"] = {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]}
    config_blob = json.dumps(config).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": OCI_CONFIG,
            "digest": _push_blob(repo, config_blob),
            "size": len(config_blob),
        },
        "layers": [
            {"mediaType": OCI_GZIP, "digest": _push_blob(repo, layer.blob), "size": len(layer.blob)}
            | ({"annotations": layer.annotations} if layer.annotations else {})
            for layer in layers
        ],
    }
    return _push_manifest(repo, "1", manifest)


@dataclass(frozen=True)
class Images:
    estargz: Image
    gzip: Image
    text: str


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    tmp = tmp_path_factory.mktemp("lazy-images")
    namespace = "z" + uuid.uuid4().hex[:10]
    index = json.loads(_get(f"http://{HUB}/v2/{BASE_REPO}/manifests/{BASE_TAG}", INDEXES))
    amd64 = next(m for m in index["manifests"] if m["platform"]["architecture"] == "amd64")
    manifest = json.loads(
        _get(f"http://{HUB}/v2/{BASE_REPO}/manifests/{amd64['digest']}", amd64["mediaType"])
    )
    base_config = json.loads(_get(f"http://{HUB}/v2/{BASE_REPO}/blobs/{manifest['config']['digest']}"))
    base_blobs = [_get(f"http://{HUB}/v2/{BASE_REPO}/blobs/{d['digest']}") for d in manifest["layers"]]
    text = f"hello from a lazy layer {secrets.token_hex(4)}\n"

    # eStargz: the base's layers converted, and our own layer with /data/small.txt prefetched.
    lazy_layers = []
    for i, blob in enumerate(base_blobs):
        tar = tmp / f"base-{i}.tar"
        tar.write_bytes(gzip.decompress(blob))
        lazy_layers.append(_estargz(tar))
    lazy_marker = f"lazy-{secrets.token_hex(6)}"
    lazy_layers.append(_estargz(_own_layer(tmp, text, lazy_marker), prefetch=("data/small.txt",)))
    lazy_digest = _push_image(f"{namespace}/lazy", base_config, lazy_layers)

    # Plain gzip: the base's blobs as served, our layer gzipped, no TOC and no annotations.
    gzip_marker = f"gzip-{secrets.token_hex(6)}"
    own = gzip.compress(_own_layer(tmp, text, gzip_marker).read_bytes(), 1, mtime=0)
    plain_layers = [Layer(b, base_config["rootfs"]["diff_ids"][i], {}) for i, b in enumerate(base_blobs)]
    plain_layers.append(Layer(own, "sha256:" + hashlib.sha256(gzip.decompress(own)).hexdigest(), {}))
    gzip_digest = _push_image(f"{namespace}/plain", base_config, plain_layers)

    def image(name: str, digest: str, layers: list[Layer], marker: str) -> Image:
        big = layers[-1].blob
        return Image(
            f"{namespace}/{name}:1", digest, "sha256:" + hashlib.sha256(big).hexdigest(), len(big), marker
        )

    yield Images(
        image("lazy", lazy_digest, lazy_layers, lazy_marker),
        image("plain", gzip_digest, plain_layers, gzip_marker),
        text,
    )
    for repo, digest in ((f"{namespace}/lazy", lazy_digest), (f"{namespace}/plain", gzip_digest)):
        _http.open(Request(f"http://{REGISTRY}/v2/{repo}/manifests/{digest}", method="DELETE"), timeout=60)


# -- pull, run, look -----------------------------------------------------------------------------


@dataclass
class Pulled:
    ref: str
    output: str
    resolved: str  # the digest containerd resolved the ref to


@contextmanager
def _pull_and_run(lazy: Lazy, ref: str, *, remote: bool) -> Iterator[Pulled]:
    """Pull ``ref`` (lazily through the stargz snapshotter, or the plain way into overlayfs),
    run the command in it; the image, its container and task go at the end."""
    container = "lazy-" + uuid.uuid4().hex[:10]
    snapshotter = ["--snapshotter", "stargz"] if remote else []
    try:
        if remote:  # lazy: the snapshotter mounts each eStargz layer instead of unpacking it
            pulled = lazy.ctr("image", "rpull", "--plain-http", ref, tool="ctr-remote")
        else:
            pulled = lazy.ctr("image", "pull", "--plain-http", ref)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        listed = lazy.ctr("image", "ls")
        rows = [line.split() for line in listed.stdout.splitlines() if line.startswith(ref + " ")]
        assert rows, listed.stdout
        ran = lazy.ctr("run", "--rm", *snapshotter, ref, container, *COMMAND)
        assert ran.returncode == 0, f"ctr run {shlex.join(COMMAND)}: {ran.stderr}"
        yield Pulled(ref, ran.stdout, rows[0][2])
    finally:
        lazy.ctr("task", "rm", "-f", container)
        lazy.ctr("container", "rm", container)
        lazy.ctr("image", "rm", "--sync", ref)


def test_an_estargz_image_is_pulled_lazily_and_runs(lazy: Lazy, images: Images, proxy: CountingProxy) -> None:
    image = images.estargz
    with _pull_and_run(lazy, f"{proxy.host}/{image.ref_path}", remote=True) as pulled:
        mounts = lazy.fuse_mounts()  # while the image is there: its layers stay mounted
        assert pulled.output == images.text
        assert pulled.resolved == image.digest
        own = [m for m in mounts if (m / "data" / image.marker).exists()]
        assert len(own) == 1, mounts  # our layer is a FUSE mount of the snapshotter ...
        assert (own[0] / "data" / "big.bin").stat().st_size == BIG  # ... with the big file listed
        assert any((m / "usr" / "bin" / "python3").exists() for m in mounts)  # the base's layer too
    fetched = proxy.blob_bytes(image.big_layer)
    assert image.big_layer_size > BIG
    assert 0 < fetched < 2 << 20, proxy.served  # the TOC and small.txt, not the 32 MiB file
    assert sum(proxy.served.values()) < BIG // 2, proxy.served


def test_the_same_image_pulled_the_plain_way_fetches_every_byte(
    lazy: Lazy, images: Images, proxy: CountingProxy
) -> None:
    image = images.estargz
    with _pull_and_run(lazy, f"{proxy.host}/{image.ref_path}", remote=False) as pulled:
        assert pulled.output == images.text
        assert pulled.resolved == image.digest
    assert proxy.blob_bytes(image.big_layer) >= image.big_layer_size, proxy.served


def test_a_plain_gzip_image_is_not_mounted_lazily(lazy: Lazy, images: Images, proxy: CountingProxy) -> None:
    image = images.gzip
    with _pull_and_run(lazy, f"{proxy.host}/{image.ref_path}", remote=True) as pulled:
        assert pulled.output == images.text  # it runs: the snapshotter unpacked it instead
        assert pulled.resolved == image.digest
        assert not any((m / "data" / image.marker).exists() for m in lazy.fuse_mounts())
    assert proxy.blob_bytes(image.big_layer) >= image.big_layer_size, proxy.served
