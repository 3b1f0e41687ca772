"""The first push, made by our own registry client: the tested image, compressed deterministically.

An engine's ``docker push`` compresses each layer with whatever gzip its build links, and
remembers what it pushed only for as long as its data root lives. Here a layer's blob is a pure
function of its content and the codec (``oci/codec.py``: ISA-L's gzip level 2 unless chosen
otherwise; no name, mtime 0, fixed members), so any runner that pushes the same image with the
same codec makes the same manifest digest. And a layer an endpoint already holds
for an earlier release of the image (the version this one extends, or a floating tag) is reused
by digest: neither compressed nor sent again, whatever compressed it.

An image that builds on another family's release (the CPU image on the SDK) finds that release's
layers at the endpoint, in the base's own repository: they are mounted from there (a cross-
repository mount, by digest), never compressed or sent again. At 15 to 30 GB, most of an image
is its SDK, and every child of it publishes only its own layers.

The blobs are written to the publish spool, from which every other endpoint is then served
without downloading them back.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ...errors import PublishError
from ...files import touch
from ...image.engine import Engine
from ...image.export import stream_layers
from ...manifest.platforms import Platform
from ...oci.codec import DEFAULT, Codec, decompressed
from ...oci.downloads import read_blob
from ...oci.members import Blob, CompressedMap, Members, blob_file, unpacked_map
from ...oci.model import Descriptor
from ...oci.registry import Manifest, RegistryClient, sha256_digest
from ...oci.store import holds, known_config, remember_config
from ...progress import Sink, Tally
from .held import BaseLayers, mounted, published_layers
from .manifests import image_manifest

CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class PushReport:
    manifest: Manifest
    compressed: int  # layers compressed in this run
    reused: int  # layers found at the endpoint or in the local map
    uploaded_bytes: int


def unpacked_digest(client: RegistryClient, repo: str, layer: Descriptor) -> str:
    """The diff_id of a layer blob at an endpoint: downloaded (read ahead by a thread of its
    own, at most the size its descriptor lists), inflated by ISA-L (or zstd) and hashed as a
    stream, every member; memory stays at a few chunks."""
    packed, unpacked = hashlib.sha256(), hashlib.sha256()
    blob, media_type = layer.digest, layer.media_type

    def hashed() -> Iterator[bytes]:
        for chunk in read_blob(client, repo, blob, CHUNK, size=layer.size):
            packed.update(chunk)
            yield chunk

    try:
        for data in decompressed(hashed(), media_type):
            unpacked.update(data)
    except ValueError as e:
        msg = f"{client.endpoint.name}: blob {blob} of {repo} does not unpack: {e}"
        raise PublishError(msg) from None
    if "sha256:" + packed.hexdigest() != blob:
        msg = f"{client.endpoint.name}: blob {blob} of {repo} hashes to sha256:{packed.hexdigest()}"
        raise PublishError(msg)
    return "sha256:" + unpacked.hexdigest()


def layer_mismatch(
    client: RegistryClient, repo: str, manifest: Manifest, diff_ids: list[str], on_line: Sink
) -> str | None:
    """Why ``manifest``'s layers are not exactly the layers ``diff_ids`` name (None: they are).
    A blob our push made is known; any other is downloaded and unpacked once."""
    layers = manifest.layers
    if len(layers) != len(diff_ids):
        return f"it has {len(layers)} layers, the tested image {len(diff_ids)}"
    checked = unpacked_map()
    for i, (layer, diff_id) in enumerate(zip(layers, diff_ids, strict=True)):
        blob = layer.digest
        if checked.get(blob) == diff_id:
            continue
        on_line(f"unpacking layer {i} ({blob[:19]}) at {client.endpoint.name} to check it")
        got = unpacked_digest(client, repo, layer)
        if got != diff_id:
            return f"its layer {i} ({blob}) unpacks to {got}; the tested image's layer {i} is {diff_id}"
        checked.put(blob, diff_id)
    return None


# --- compressing -------------------------------------------------------------------------------


class _Compressing:
    """A sink for ``stream_layers``: the layer compressed while it arrives; ``on_kept`` hears of
    the blob of a layer asked for."""

    def __init__(self, members: Members, on_kept: Callable[[str, Blob], None]) -> None:
        self._members, self._on_kept = members, on_kept

    def write(self, data: bytes) -> None:
        self._members.write(data)

    def keep(self, diff_id: str) -> None:
        self._on_kept(diff_id, self._members.blob())

    def drop(self) -> None:
        self._members.discard()


def _spooled(spool: Path, digest: str, on_line: Sink) -> bool:
    """The spool holds ``digest`` intact (a damaged entry is dropped, to be compressed again)."""
    path = blob_file(spool, digest)
    if not path.is_file():
        return False
    if holds(path, digest):
        touch(path)
        return True
    on_line(f"the blob cache {spool} held a damaged {digest[:19]}; compressing that layer again")
    path.unlink()
    return False


# --- the push ----------------------------------------------------------------------------------


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
    codec: Codec = DEFAULT,
    base: BaseLayers | None = None,
    platform: Platform | None = None,
) -> PushReport:
    """Push ``image_id`` to ``repo`` (blobs, then the manifest by digest, then ``tag`` if given).
    ``on_spooled`` hears of each blob in the spool just before it goes to ``repo``, so other
    endpoints can be sent it while the next layer is still being compressed. ``base``: the
    layers of the release it builds on, mounted from there. ``platform``: the image is that
    platform's (an earlier release's index gives its layers through that platform's image)."""
    diff_ids: list[str] = list((engine.inspect_raw(image_id).get("RootFS") or {}).get("Layers") or ())
    local = CompressedMap(codec)
    at_endpoint = published_layers(client, repo, earlier_tags, platform)
    blobs: dict[str, Blob] = {}
    need: set[str] = set()
    held: set[str] = set()  # at the endpoint already, or mounted there: nothing to send
    for d in diff_ids:
        blob = at_endpoint.get(d)
        if blob is not None and client.blob_exists(repo, blob.digest):
            blobs[d] = blob
            continue
        blob = base.blobs.get(d) if base is not None else None
        if blob is not None and mounted(client, repo, blob.digest, base):
            blobs[d] = blob
            held.add(d)
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
        path = blob_file(spool, blob.digest)
        if on_spooled is not None and path.is_file():
            on_spooled(blob)
        client.ensure_blob(repo, blob.digest, lambda: path, chunk_size=chunk_size)

    if need or config is None:
        if need:
            on_line(f"compressing {len(need)} of {len(diff_ids)} layers ({codec.format}, {codec})")
        # A pipeline: each layer is compressed while docker save streams it (its 32 MiB members
        # on both cores), and uploaded while the next one streams.
        with ThreadPoolExecutor(max_workers=2) as members, ThreadPoolExecutor(max_workers=1) as line:
            jobs: list[Future[None]] = []

            def kept(diff: str, blob: Blob) -> None:
                local.put(diff, blob)  # and what the blob unpacks to
                blobs[diff] = blob
                jobs.append(line.submit(upload, blob))

            opened = iter(range(1, len(need) + 1))

            def open_layer(size: int) -> _Compressing:
                n = next(opened, None)
                task = f"compressing layer {n} of {len(need)}" if n else "compressing a layer that may be new"
                return _Compressing(Members(spool, members, codec, Tally(f"{task} ({codec})", size)), kept)

            config = stream_layers(engine, image_id, need, open_layer, diff_ids)
            for j in jobs:
                j.result()
        remember_config(config)
    manifest = image_manifest(config, [blobs[d] for d in diff_ids], annotations)
    for d in diff_ids:
        if d not in need and d not in held:
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
