"""The first push, made by our own registry client: the tested image, compressed deterministically.

An engine's ``docker push`` compresses each layer with whatever gzip its build links, and
remembers what it pushed only for as long as its data root lives. Here a layer's blob is a pure
function of its content (gzip with no name, mtime 0, a fixed level, from one zlib), so any runner
that pushes the same image makes the same manifest digest. And a layer an endpoint already holds
for an earlier release of the image (the version this one extends, or a floating tag) is reused
by digest: neither compressed nor sent again, whatever compressed it.

The blobs are written to the publish spool, from which every other endpoint is then served
without downloading them back.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tempfile
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PublishError, WireError
from ..files import touch
from ..image.engine import Engine
from ..image.export import save_layers
from ..oci.registry import Manifest, RegistryClient, sha256_digest
from ..oci.store import DigestMap, holds, known_config, remember_config
from ..progress import Sink
from ..settings import cache_dir

# OCI image manifests (annotations are theirs; skopeo's oci: layouts read only these). Releases
# pushed by earlier versions as Docker schema 2 keep their manifests: a rerun reuses what is
# served, and their layers are reused by digest (the same gzip bytes under either type).
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LAYER_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"
_AS_OCI = {DOCKER_LAYER_TYPE: LAYER_TYPE}
GZIP_LEVEL = 6
MEMBER = 32 << 20  # bytes of layer per gzip member
CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Blob:
    digest: str
    size: int
    media_type: str = LAYER_TYPE


@dataclass(frozen=True, kw_only=True)
class PushReport:
    manifest: Manifest
    compressed: int  # layers compressed in this run
    reused: int  # layers found at the endpoint or in the local map
    uploaded_bytes: int


class CompressedMap:
    """diff_id → the blob our gzip makes of it. A pure function of the layer (for one zlib and
    level), so it is kept across runs; the blob itself is in the spool, or at an endpoint."""

    def __init__(self) -> None:
        self._map = DigestMap(
            f"compressed/zlib-{zlib.ZLIB_RUNTIME_VERSION}-level-{GZIP_LEVEL}-members-{MEMBER >> 20}M"
        )

    def get(self, diff_id: str) -> Blob | None:
        try:
            data = json.loads(self._map.get(diff_id) or "")
            return Blob(digest=str(data["digest"]), size=int(data["size"]))
        except (ValueError, KeyError, TypeError):
            return None

    def put(self, diff_id: str, blob: Blob) -> None:
        self._map.put(diff_id, json.dumps({"digest": blob.digest, "size": blob.size}))


def unpacked_map() -> DigestMap:
    """blob digest → the diff_id it unpacks to, for blobs checked by downloading them. A blob's
    digest fixes its bytes, so the answer holds forever."""
    return DigestMap("unpacked")


def unpacked_digest(client: RegistryClient, repo: str, blob: str) -> str:
    """The diff_id of a gzip layer blob at an endpoint: downloaded, unpacked and hashed as a
    stream (every gzip member; memory stays at one chunk)."""
    resp = client.open_blob(repo, blob)
    packed, unpacked = hashlib.sha256(), hashlib.sha256()
    inflate = zlib.decompressobj(wbits=47)  # gzip or zlib header, automatically
    for chunk in resp.iter_content(CHUNK):
        packed.update(chunk)
        data = chunk
        while data:
            unpacked.update(inflate.decompress(data))
            if not inflate.eof:
                break
            data = inflate.unused_data  # the next gzip member, if any
            inflate = zlib.decompressobj(wbits=47)
    unpacked.update(inflate.flush())
    if "sha256:" + packed.hexdigest() != blob:
        msg = f"{client.endpoint.name}: blob {blob} of {repo} hashes to sha256:{packed.hexdigest()}"
        raise PublishError(msg)
    return "sha256:" + unpacked.hexdigest()


def layer_mismatch(
    client: RegistryClient, repo: str, manifest: Manifest, diff_ids: list[str], on_line: Sink
) -> str | None:
    """Why ``manifest``'s layers are not exactly the layers ``diff_ids`` name (None: they are).
    A blob our push made is known; any other is downloaded and unpacked once."""
    layers = manifest.data.get("layers") or []
    if len(layers) != len(diff_ids):
        return f"it has {len(layers)} layers, the tested image {len(diff_ids)}"
    ours, checked = CompressedMap(), unpacked_map()
    for i, (layer, diff_id) in enumerate(zip(layers, diff_ids, strict=True)):
        blob = str(layer.get("digest"))
        known = ours.get(diff_id)
        if (known is not None and known.digest == blob) or checked.get(blob) == diff_id:
            continue
        on_line(f"unpacking layer {i} ({blob[:19]}) at {client.endpoint.name} to check it")
        got = unpacked_digest(client, repo, blob)
        if got != diff_id:
            return f"its layer {i} ({blob}) unpacks to {got}; the tested image's layer {i} is {diff_id}"
        checked.put(blob, diff_id)
    return None


def published_layers(client: RegistryClient, repo: str, tags: Iterable[str]) -> dict[str, Blob]:
    """diff_id → blob, for the images the endpoint serves at ``tags`` (earlier releases)."""
    out: dict[str, Blob] = {}
    for tag in tags:
        try:
            manifest = client.get_manifest(repo, tag)
            if manifest is None or manifest.media_type not in (MANIFEST_TYPE, DOCKER_MANIFEST_TYPE):
                continue
            config = json.loads(client.blob_bytes(repo, manifest.config_digest))
        except (WireError, ValueError):
            continue
        diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
        layers = manifest.data.get("layers") or []
        if len(diff_ids) != len(layers):
            continue
        for diff_id, layer in zip(diff_ids, layers, strict=True):
            out.setdefault(diff_id, Blob(digest=layer["digest"], size=int(layer["size"]),
                                         media_type=layer.get("mediaType", LAYER_TYPE)))  # fmt: skip
    return out


# --- compressing -------------------------------------------------------------------------------


def _gzip_member(data: bytes) -> bytes:
    """One gzip member: no file name, mtime 0, fixed level: the same bytes give the same member."""
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


def compress(source: Path, spool: Path, pool: ThreadPoolExecutor) -> Blob:
    """gzip ``source`` into the spool deterministically. The layer is cut into fixed 32 MiB
    pieces compressed in parallel (zlib runs outside the GIL) and written as consecutive gzip
    members, which RFC 1952 and every registry client (Go's gzip, Python's) read as one stream;
    the pieces depend only on the content, so the blob does too."""
    sha = hashlib.sha256()
    size = 0
    with tempfile.NamedTemporaryFile(dir=spool, prefix=".gz-", delete=False) as out, source.open("rb") as src:
        pending: list[Future[bytes]] = []
        while True:
            data = src.read(MEMBER)
            if data:
                pending.append(pool.submit(_gzip_member, data))
            while pending and (len(pending) > 2 or not data):
                member = pending.pop(0).result()
                sha.update(member)
                size += len(member)
                out.write(member)
            if not data:
                break
    digest = "sha256:" + sha.hexdigest()
    Path(out.name).replace(spool / digest.replace(":", "-"))
    return Blob(digest=digest, size=size)


def _spooled(spool: Path, digest: str, on_line: Sink) -> bool:
    """The spool holds ``digest`` intact (a damaged entry is dropped, to be compressed again)."""
    path = spool / digest.replace(":", "-")
    if not path.is_file():
        return False
    if holds(path, digest):
        touch(path)
        return True
    on_line(f"the blob cache {spool} held a damaged {digest[:19]}; compressing that layer again")
    path.unlink()
    return False


# --- the push ----------------------------------------------------------------------------------


def image_manifest(config: bytes, layers: list[Blob], annotations: dict[str, str] | None = None) -> Manifest:
    data: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "size": len(config), "digest": sha256_digest(config)},
        "layers": [
            {"mediaType": _AS_OCI.get(b.media_type, b.media_type), "size": b.size, "digest": b.digest}
            for b in layers
        ],
    }
    if annotations:
        data["annotations"] = dict(sorted(annotations.items()))
    body = json.dumps(data, indent=3).encode()
    return Manifest(digest=sha256_digest(body), media_type=MANIFEST_TYPE, body=body)


def push_image(
    engine: Engine,
    image_id: str,
    client: RegistryClient,
    repo: str,
    tag: str | None,
    *,
    spool: Path,
    earlier_tags: Iterable[str],
    chunk_size: int | None,
    on_line: Sink,
    on_spooled: Callable[[Blob], None] | None = None,
    annotations: dict[str, str] | None = None,
) -> PushReport:
    """Push ``image_id`` to ``repo`` (blobs, then the manifest by digest, then ``tag`` if given).
    ``on_spooled`` hears of each blob in the spool just before it goes to ``repo``, so other
    endpoints can be sent it while the next layer is still being compressed."""
    diff_ids: list[str] = list((engine.inspect_raw(image_id).get("RootFS") or {}).get("Layers") or ())
    local = CompressedMap()
    at_endpoint = published_layers(client, repo, earlier_tags)
    blobs: dict[str, Blob] = {}
    need: set[str] = set()
    for d in diff_ids:
        blob = at_endpoint.get(d)
        if blob is not None and client.blob_exists(repo, blob.digest):
            blobs[d] = blob
            continue
        blob = local.get(d)
        if blob is not None and (
            client.blob_exists(repo, blob.digest) or _spooled(spool, blob.digest, on_line)
        ):
            blobs[d] = blob
            continue
        need.add(d)
    reused = len(diff_ids) - len(need)
    config = known_config(image_id)
    before = client.stats["uploaded_bytes"]

    def upload(blob: Blob) -> None:
        path = spool / blob.digest.replace(":", "-")
        if on_spooled is not None and path.is_file():
            on_spooled(blob)
        client.ensure_blob(repo, blob.digest, lambda: path, chunk_size=chunk_size)

    with tempfile.TemporaryDirectory(prefix="xpu-push-", dir=cache_dir()) as tmp_name:
        if need or config is None:
            if need:
                on_line(f"compressing {len(need)} of {len(diff_ids)} layers (gzip level {GZIP_LEVEL})")
            # A pipeline: while docker save streams the next layer, the last one is compressed
            # (its 32 MiB members on both cores) and uploaded.
            with ThreadPoolExecutor(max_workers=2) as members, ThreadPoolExecutor(max_workers=1) as line:
                jobs: list[Future[None]] = []

                def take(diff: str, path: Path) -> None:
                    def job() -> None:
                        blob = compress(path, spool, members)
                        path.unlink()
                        local.put(diff, blob)
                        blobs[diff] = blob
                        upload(blob)

                    jobs.append(line.submit(job))

                config, _ = save_layers(engine, image_id, need, Path(tmp_name), on_layer=take)
                for j in jobs:
                    j.result()
            remember_config(config)
    manifest = image_manifest(config, [blobs[d] for d in diff_ids], annotations)
    for d in diff_ids:
        if d not in need:
            upload(blobs[d])
    config_digest = sha256_digest(config)
    if not client.blob_exists(repo, config_digest):
        with tempfile.TemporaryDirectory(prefix="xpu-config-") as tmp:
            path = Path(tmp) / "config.json"
            path.write_bytes(config)
            client.upload_blob(repo, config_digest, path)
    client.put_manifest(repo, manifest.digest, manifest)
    if tag is not None:
        client.put_manifest(repo, tag, manifest)
    return PushReport(
        manifest=manifest,
        compressed=len(need),
        reused=reused,
        uploaded_bytes=client.stats["uploaded_bytes"] - before,
    )
