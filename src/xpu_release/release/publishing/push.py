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
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ...errors import PublishError
from ...files import touch
from ...image.engine import Engine
from ...image.export import stream_layers
from ...image.layerform import GZIP, LayerForm
from ...manifest.platforms import Platform
from ...oci.codec import DEFAULT, Codec, decompressed
from ...oci.downloads import read_blob
from ...oci.estargz import written_profile
from ...oci.members import (
    Blob,
    CompressedMap,
    Members,
    blob_file,
    compress,
    spool_dir,
    spool_estargz,
    unpacked_map,
)
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


class _Remaking:
    """A sink for ``stream_layers`` of an eStargz image: the layer's tar kept in a file; one that
    holds a TOC (the image's own) written again as eStargz with the image's form, which must give
    the very layer the image holds (the same tar, so the same TOC, offsets and blob); another
    (its base's) compressed as any layer is."""

    def __init__(self, how: PushOptions, pool: ThreadPoolExecutor, lazy: CompressedMap,
                 on_kept: Callable[[str, Blob], None]) -> None:  # fmt: skip
        self._how, self._pool, self._lazy, self._on_kept = how, pool, lazy, on_kept
        self._dir = tempfile.TemporaryDirectory(prefix="xpu-estargz-", dir=spool_dir().parent)
        self._path = Path(self._dir.name) / "layer.tar"
        self._file = self._path.open("wb")

    def write(self, data: bytes) -> None:
        self._file.write(data)

    def keep(self, diff_id: str) -> None:
        self._file.close()
        try:
            form = self._how.form
            profile = written_profile(self._path)
            if profile is None:  # no eStargz layer: its base's, compressed as any layer is
                self._on_kept(diff_id, compress(self._path, self._how.spool, self._pool, self._how.codec))
                return
            # With the profile it was written with (an SDK's layer under its child: the SDK's).
            again = partial(spool_estargz, self._path, None, form.codec, form.blob_key, profile, self._pool)
            made = first = again()
            if made != diff_id:
                # Seen twice in some hundred writes here, not explained (docs/using/reproducible.md,
                # Limits): one member of the same bytes compressed to another size. The write is
                # checked, so it is made once more; a second that differs as well says whether
                # the writer varies (two answers) or its input does (one).
                self._how.on_line(f"the eStargz layer {diff_id[:19]} written again came out as "
                                  f"{made[:19]}; writing it once more")  # fmt: skip
                made = again()
            blob = self._lazy.get(made)
            if made != diff_id or blob is None:
                why = made if made == first else f"{first}, then {made}"
                msg = (
                    f"the eStargz layer {diff_id} written again on this runner is {why}: its codec "
                    f"({form.codec.key}) writes other bytes than the one that built the image; "
                    "release it again here (`xpu-release release`), which builds and tests it with this codec"
                )
                raise PublishError(msg)
            self._on_kept(diff_id, blob)
        finally:
            self._dir.cleanup()

    def drop(self) -> None:
        self._file.close()
        self._dir.cleanup()


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


@dataclass(frozen=True, kw_only=True)
class PushOptions:
    """How the first push goes. ``on_spooled`` hears of each blob in the spool just before it goes
    to the endpoint, so other endpoints can be sent it while the next layer is still being
    compressed. ``base``: the layers of the release it builds on, mounted from there.
    ``platform``: the image is that platform's (an earlier release's index gives its layers
    through that platform's image). ``earlier_tags``: the releases whose layers are reused."""

    spool: Path
    on_line: Sink
    earlier_tags: tuple[str, ...] = ()
    chunk_size: int | None = None
    on_spooled: Callable[[Blob], None] | None = None
    annotations: dict[str, str] | None = None
    codec: Codec = DEFAULT
    base: BaseLayers | None = None
    platform: Platform | None = None
    # How the image's own layers are written: an eStargz image's blobs are the ones its build
    # wrote (their TOC is in the tested image), found by diff_id or made again the same way.
    form: LayerForm = GZIP


def push_image(engine: Engine, image_id: str, client: RegistryClient, repo: str, tag: str | None,
               how: PushOptions) -> PushReport:  # fmt: skip
    """Push ``image_id`` to ``repo`` (blobs, then the manifest by digest, then ``tag`` if given)."""
    return _Push(engine, image_id, client, repo, how).run(tag)


class _Push:
    """One first push: which layers the endpoint holds or can mount, the others compressed (a
    pipeline with the engine's export) and sent, then the config and the manifest."""

    def __init__(
        self, engine: Engine, image_id: str, client: RegistryClient, repo: str, how: PushOptions
    ) -> None:
        self.engine, self.image_id, self.client, self.repo, self.how = engine, image_id, client, repo, how
        self.diff_ids: list[str] = list(
            (engine.inspect_raw(image_id).get("RootFS") or {}).get("Layers") or ()
        )
        # diff_id → blob, as this runner made them: an eStargz image's own layers in its form's
        # map, any other layer (its base's) in the codec's.
        form = how.form
        self.local = CompressedMap(how.codec)
        self.lazy = CompressedMap(form.codec, form.blob_key) if form.estargz else None
        self.blobs: dict[str, Blob] = {}
        self.held: set[str] = set()  # at the endpoint already, or mounted there: nothing to send

    def run(self, tag: str | None) -> PushReport:
        before = self.client.stats["uploaded_bytes"]
        how = self.how
        at_endpoint = published_layers(self.client, self.repo, how.earlier_tags, how.platform)
        need = {d for d in self.diff_ids if not self._found(d, at_endpoint)}
        config = known_config(self.image_id)
        if need or config is None:
            config = self._compress(need)
            remember_config(config)
        manifest = image_manifest(config, [self.blobs[d] for d in self.diff_ids], self.how.annotations)
        for d in self.diff_ids:
            if d not in need and d not in self.held:
                self._upload(self.blobs[d])
        config_digest = sha256_digest(config)
        if not self.client.blob_exists(self.repo, config_digest):
            with tempfile.TemporaryDirectory(prefix="xpu-config-") as tmp:
                path = Path(tmp) / "config.json"
                path.write_bytes(config)
                self.client.upload_blob(self.repo, config_digest, path)
        self.client.put_manifest(self.repo, manifest.digest, manifest)
        if tag is not None:
            self.client.put_manifest(self.repo, tag, manifest)
        uploaded = self.client.stats["uploaded_bytes"] - before
        return PushReport(manifest=manifest, compressed=len(need), reused=len(self.diff_ids) - len(need),
                          uploaded_bytes=uploaded)  # fmt: skip

    def _found(self, d: str, at_endpoint: dict[str, Blob]) -> bool:
        """Whether layer ``d`` needs no compressing: the endpoint holds it for an earlier release,
        it mounts from the base, or the local map knows its blob and the endpoint or spool has it."""
        client, repo, base = self.client, self.repo, self.how.base
        blob = at_endpoint.get(d)
        if blob is not None and client.blob_exists(repo, blob.digest):
            self.blobs[d] = blob
            return True
        blob = base.blobs.get(d) if base is not None else None
        if blob is not None and mounted(client, repo, blob.digest, base):
            self.blobs[d] = blob
            self.held.add(d)
            return True
        blob = (self.lazy.get(d) if self.lazy is not None else None) or self.local.get(d)
        if blob is not None and (
            client.blob_exists(repo, blob.digest) or _spooled(self.how.spool, blob.digest, self.how.on_line)
        ):
            self.blobs[d] = blob
            return True
        return False

    def _upload(self, blob: Blob) -> None:
        path = blob_file(self.how.spool, blob.digest)
        if self.how.on_spooled is not None and path.is_file():
            self.how.on_spooled(blob)
        self.client.ensure_blob(self.repo, blob.digest, lambda: path, chunk_size=self.how.chunk_size)

    def _compress(self, need: set[str]) -> bytes:
        """The layers of ``need`` compressed while docker save streams them (its 32 MiB members on
        both cores), each uploaded while the next one streams; the image's config."""
        how = self.how
        if need:
            lazy = "; eStargz ones as they were built" if how.form.estargz else ""
            codec = f"{how.codec.format}, {how.codec}{lazy}"
            how.on_line(f"compressing {len(need)} of {len(self.diff_ids)} layers ({codec})")
        with ThreadPoolExecutor(max_workers=2) as members, ThreadPoolExecutor(max_workers=1) as line:
            jobs: list[Future[None]] = []

            def kept(diff: str, blob: Blob) -> None:
                self.local.put(diff, blob)  # and what the blob unpacks to
                self.blobs[diff] = blob
                jobs.append(line.submit(self._upload, blob))

            opened = iter(range(1, len(need) + 1))

            def open_layer(size: int) -> _Compressing | _Remaking:
                n = next(opened, None)
                task = f"compressing layer {n} of {len(need)}" if n else "compressing a layer that may be new"
                if how.form.estargz:
                    assert self.lazy is not None
                    return _Remaking(how, members, self.lazy, kept)
                return _Compressing(
                    Members(how.spool, members, how.codec, Tally(f"{task} ({how.codec})", size)), kept
                )

            config = stream_layers(self.engine, self.image_id, need, open_layer, self.diff_ids)
            for j in jobs:
                j.result()
        return config
