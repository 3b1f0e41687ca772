"""An OCI image layout directory (image-spec ``image-layout.md``): ``oci-layout``, ``index.json``
and ``blobs/sha256/<hex>``. What skopeo reads as ``oci:DIR:TAG``, and what an air-gapped region
is carried in. Tags are ``org.opencontainers.image.ref.name`` annotations of ``index.json``'s
entries; an entry without one is a manifest kept for what refers to it (image-spec 1.1 lets
``index.json`` list referrers). Every blob is written through a temporary file and checked
against its digest, so an interrupted copy leaves no half blob under its name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DamagedFileError, OutputError, TagConflict
from ..files import describe
from ..guard import limits
from ..guard.locks import folder_lock
from ..guard.proven import landed, write_proven
from ..guard.reading import file_chunks, is_regular, read_file, read_json
from ..guard.shown import shown
from ..guard.writing import Identity, open_folder, settle, write_bytes
from .model import Descriptor, ImageIndex, is_sha256, parse_index
from .registry import OCI_INDEX, Manifest
from .store import canonical_json, sha256_digest

REF_NAME = "org.opencontainers.image.ref.name"
LAYOUT_VERSION = {"imageLayoutVersion": "1.0.0"}


@dataclass(frozen=True)
class Layout:
    root: Path

    def blob_path(self, digest: str) -> Path:
        if not is_sha256(digest):
            msg = f"{self.root}: {shown(repr(digest), 100)} is not a sha256 digest"
            raise DamagedFileError(msg)
        return self.root / "blobs" / "sha256" / digest.removeprefix("sha256:")

    def create(self) -> None:
        """Make the directory a layout (an existing one is kept as it is)."""
        if self.root.exists() and not self.root.is_dir():
            msg = f"{self.root}: not a directory; name a directory for oci:DIR"
            raise ConfigError(msg)
        try:
            os.close(open_folder(self.root / "blobs" / "sha256", within=self.root))
            if not os.path.lexists(self.root / "oci-layout"):
                write_bytes(self.root / "oci-layout", json.dumps(LAYOUT_VERSION).encode(), within=self.root)
            if not os.path.lexists(self.root / "index.json"):
                self._write_index({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []})
        except OSError as exc:
            msg = f"{self.root}: cannot make an OCI layout there ({describe(exc)})"
            raise OutputError(msg) from None
        self.check()  # an oci-layout that was there already (a folder, a FIFO) is no layout

    def check(self) -> None:
        """It is a layout this reader knows (``--from oci:DIR``): none there is a ConfigError (a
        wrong name), a marker file that is not the spec's is damage."""

        def none_there(_: str) -> Exception:
            return ConfigError(f"{self.root}: not an OCI image layout (no oci-layout file)")

        path = self.root / "oci-layout"
        marker = read_json(path, what=str(path), limit=limits.MAX_MARKER_BYTES, missing=none_there)
        version = marker.get("imageLayoutVersion") if isinstance(marker, dict) else None
        if not isinstance(version, str) or not version.startswith("1."):
            msg = f"{self.root}/oci-layout: image layout version {shown(repr(version), 60)} is not 1.x"
            raise DamagedFileError(msg)

    # --- blobs ---------------------------------------------------------------------------------

    def has_blob(self, digest: str) -> bool:
        """A regular file is there under ``digest``, itself (never opened: a FIFO there is no
        blob; a link is not followed: a layout's blob is a file of its own)."""
        path = self.blob_path(digest)
        return not path.is_symlink() and is_regular(path)

    def write_blob(
        self, digest: str, size: int, blocks: Iterable[bytes], then: Callable[[], str | None] | None = None
    ) -> Identity:
        """``blocks`` as the blob ``digest``, put under its name only once proven to be its
        ``size`` bytes and ``then`` finds nothing wrong with them (``guard.proven.NotAsNamed``
        if not: nothing is put there). Not synced
        one by one: ``put_manifests`` settles the disk once before ``index.json`` lists them; a
        blob a crash left torn is found by the next run's proof and written again."""
        return write_proven(
            self.blob_path(digest), digest, size, blocks, within=self.root, durable=False, then=then
        )

    def proven(self, digest: str, size: int) -> Identity | None:
        """The blob's file, if it is there as a regular file (no link followed) holding the
        ``size`` bytes that hash to ``digest``; None if it is missing or damaged."""
        found = landed(self.blob_path(digest), within=self.root, size=size)
        return found[1] if found is not None and found[0] == digest else None

    def put_bytes(self, data: bytes) -> str:
        digest = sha256_digest(data)
        if self.proven(digest, len(data)) is None:
            self.write_blob(digest, len(data), [data])
        return digest

    def read_blob(self, digest: str, limit: int = limits.MAX_DOCUMENT_BYTES) -> bytes:
        """A small blob (a manifest) whole, at most ``limit`` bytes, checked against its digest."""
        data = read_file(self.blob_path(digest), what=f"{self.root}: blob {digest}", limit=limit)
        if sha256_digest(data) != digest:
            msg = f"{self.root}: blob {digest} is not what its digest says"
            raise DamagedFileError(msg)
        return data

    def blob_chunks(self, digest: str, size: int) -> Iterator[bytes]:
        """A blob of ``size`` bytes (as its manifest lists it) in pieces; a blob of another size,
        or no regular file, is damage (the caller hashes the bytes)."""
        return file_chunks(self.blob_path(digest), what=f"{self.root}: blob {digest}", limit=size, exact=True)

    # --- index.json ----------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.root / "index.json").is_file()

    def _index(self) -> Any:
        """``index.json`` as written (bounded in size and depth; a FIFO is refused unopened),
        checked to be an image index: its other fields and entries are kept when it is written."""
        what = f"{self.root}/index.json"
        data = read_json(self.root / "index.json", what=what, limit=limits.MAX_INDEX_JSON_BYTES)
        parse_index(data, what=what, bound=limits.MAX_DESCRIPTORS)
        return data

    def index(self) -> ImageIndex:
        """``index.json``, parsed and checked (bounded in size, depth and entries)."""
        what = f"{self.root}/index.json"
        return parse_index(self._index(), what=what, bound=limits.MAX_DESCRIPTORS)

    def entries(self) -> list[dict[str, Any]]:
        """``index.json``'s descriptors, as they are written there."""
        return [d.to_json() for d in self.index().manifests]

    def _write_index(self, document: dict[str, Any]) -> None:
        write_bytes(self.root / "index.json", canonical_json(document), within=self.root, what="index.json")

    def _find(self, reference: str) -> Descriptor | None:
        """The entry of ``index.json`` a tag (or a digest) names."""
        for d in self.index().manifests:
            if reference in (d.digest, d.annotation(REF_NAME)):
                return d
        return None

    def resolve(self, reference: str) -> str | None:
        """The digest a tag (or a digest) names in ``index.json``."""
        found = self._find(reference)
        return found.digest if found is not None else None

    def get_manifest(self, reference: str) -> Manifest | None:
        """The manifest a tag or digest names (None: nothing names it). A blob there that is no
        manifest is damage, and so is one ``index.json`` lists that the layout lacks (missing, a
        FIFO): the name is right, the layout is not."""
        found = self._find(reference)
        if found is None:
            if not reference.startswith("sha256:") or not self.has_blob(reference):
                return None
            return self._manifest(reference, "")
        if not self.has_blob(found.digest):
            msg = (f"{self.root}: index.json lists {shown(reference, 100)} as {found.digest}, but its blob "
                   "is missing or is not a regular file (damaged); copy the layout again")  # fmt: skip
            raise DamagedFileError(msg)
        return self._manifest(found.digest, found.media_type)

    def _manifest(self, digest: str, media_type: str) -> Manifest:
        """The manifest blob ``digest`` (bounded, checked against its digest and parsed)."""
        body = self.read_blob(digest, limit=limits.MAX_MANIFEST_BYTES)
        return Manifest.read(body, digest=digest, media_type=media_type,
                             what=f"{self.root}: manifest {digest}", error=DamagedFileError)  # fmt: skip

    def put_manifests(
        self,
        manifests: Iterable[tuple[Manifest, str | None]],
        *,
        version_tag: str | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        """Each manifest as a blob, listed in ``index.json``: under its tag (moved there from
        any other manifest), or untagged (a referrer). ``index.json`` is read, changed and
        written once, under the layout's lock; its fields and entries that are not these are
        kept. ``version_tag`` never moves: if it names another manifest by the time the lock is
        held (another run put it there), ``TagConflict`` and nothing is listed."""
        listed = [(m, tag) for m, tag in manifests]
        for m, _ in listed:
            self.put_bytes(m.body)
        settle(self.root)  # every blob on disk before index.json lists it
        with folder_lock(self.root, on_wait):
            data = self._index()
            if not isinstance(data, dict) or not isinstance(data.get("manifests", []), list):
                msg = f"{self.root}/index.json: not an image index (no list of manifests); not changed"
                raise DamagedFileError(msg)
            current: list[Any] = data.get("manifests", [])
            held = _tagged(current, version_tag) if version_tag is not None else None
            for m, tag in listed:
                if tag is not None and tag == version_tag and held not in (None, m.digest):
                    msg = (f"oci:{self.root}:{tag} holds {held}, not {m.digest}: another run put another "
                           "image there; mirror into another layout, or remove that tag first")  # fmt: skip
                    raise TagConflict(msg)
            tags = {tag: _entry(m, tag) for m, tag in listed if tag is not None}
            untagged = {m.digest: _entry(m, None) for m, tag in listed if tag is None}
            current = [e for e in current if not _replaced(e, tags, untagged)]
            current += [*tags.values(), *untagged.values()]
            data.setdefault("schemaVersion", 2)
            data.setdefault("mediaType", OCI_INDEX)
            data["manifests"] = sorted(current, key=_order)
            self._write_index(data)

    def referrers(self, subject: str) -> list[Manifest]:
        """The manifests ``index.json`` lists untagged whose ``subject`` is ``subject``, each
        once however many times it is listed; more than ``MAX_REFERRERS`` of them is refused.
        ``index.json`` is read once (it was once per referrer: 10,000 took 20 minutes)."""
        out: list[Manifest] = []
        seen: set[str] = set()
        for d in self.index().manifests:
            if d.annotation(REF_NAME) is not None or d.digest in seen:
                continue
            seen.add(d.digest)
            m = self._manifest(d.digest, d.media_type) if self.has_blob(d.digest) else None
            if m is not None and m.subject == subject:
                out.append(m)
                if len(out) > limits.MAX_REFERRERS:
                    bound = limits.MAX_REFERRERS
                    msg = f"{self.root}: more than {bound} referrers of {subject}; the limit is {bound}"
                    raise DamagedFileError(msg)
        return out


def _tagged(entries: list[Any], tag: str) -> str | None:
    """The digest ``tag`` names among ``entries``."""
    return next((str(e.get("digest")) for e in entries if _name(e) == tag), None)


def _name(e: Any) -> str | None:
    """The tag an ``index.json`` entry carries (None: untagged, or no entry of ours to read)."""
    notes = e.get("annotations") if isinstance(e, dict) else None
    name = notes.get(REF_NAME) if isinstance(notes, dict) else None
    return name if isinstance(name, str) else None


def _entry(manifest: Manifest, tag: str | None) -> dict[str, Any]:
    view = manifest.view
    entry: dict[str, Any] = {"mediaType": manifest.media_type, "digest": manifest.digest,
                             "size": len(manifest.body)}  # fmt: skip
    if view.artifact_type:
        entry["artifactType"] = view.artifact_type
    notes = dict(view.annotations) if not tag else {}
    if tag:
        notes[REF_NAME] = tag
    if notes:
        entry["annotations"] = notes
    return entry


def _replaced(e: Any, tags: dict[str, Any], untagged: dict[str, Any]) -> bool:
    """An entry a new one takes the place of: one at a tag being set, or the untagged entry of a
    manifest being listed untagged again."""
    if not isinstance(e, dict):
        return False
    name = _name(e)
    return name in tags if name is not None else e.get("digest") in untagged


def _order(e: Any) -> tuple[int, str, str]:
    """Tags first, by name; then referrers; what is not an entry at all, last, as it was."""
    if not isinstance(e, dict):
        return 2, "", ""
    return (0, str(_name(e)), str(e.get("digest"))) if _name(e) is not None else (1, "", str(e.get("digest")))
