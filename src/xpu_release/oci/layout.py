"""An OCI image layout directory (image-spec ``image-layout.md``): ``oci-layout``, ``index.json``
and ``blobs/sha256/<hex>``. What skopeo reads as ``oci:DIR:TAG``, and what an air-gapped region
is carried in. Tags are ``org.opencontainers.image.ref.name`` annotations of ``index.json``'s
entries; an entry without one is a manifest kept for what refers to it (image-spec 1.1 lets
``index.json`` list referrers). Every blob is written through a temporary file and checked
against its digest, so an interrupted copy leaves no half blob under its name.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DamagedFileError, OutputError
from ..guard import limits
from ..guard.reading import file_chunks, is_regular, read_file, read_json
from ..guard.shown import shown
from .model import Descriptor, ImageIndex, is_sha256, parse_index
from .registry import OCI_INDEX, Manifest
from .store import atomic_write, canonical_json, holds, sha256_digest

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
            (self.root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
            if not (self.root / "oci-layout").exists():
                atomic_write(self.root / "oci-layout", json.dumps(LAYOUT_VERSION).encode())
            if not (self.root / "index.json").exists():
                self._write_index([])
        except OSError as exc:
            msg = f"{self.root}: cannot make an OCI layout there ({exc.strerror or type(exc).__name__})"
            raise OutputError(msg) from None

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
        """A regular file is there under ``digest`` (never opened: a FIFO there is no blob)."""
        return is_regular(self.blob_path(digest))

    def put_file(self, digest: str, source: Path) -> None:
        """Move (or copy) ``source`` in as ``digest``, checked first."""
        dest = self.blob_path(digest)
        if not holds(source, digest):
            msg = f"{source}: does not hash to {digest}; not written into {self.root}"
            raise DamagedFileError(msg)
        tmp = dest.with_name(f".{dest.name}.partial")
        try:
            shutil.copyfile(source, tmp)
            tmp.replace(dest)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            msg = f"{self.root}: cannot write blob {digest} ({exc.strerror or type(exc).__name__})"
            raise OutputError(msg) from None

    def put_bytes(self, data: bytes) -> str:
        digest = sha256_digest(data)
        path = self.blob_path(digest)
        if not holds(path, digest):
            atomic_write(path, data)
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

    def index(self) -> ImageIndex:
        """``index.json``, parsed and checked (bounded in size, depth and entries)."""
        what = f"{self.root}/index.json"
        data = read_json(self.root / "index.json", what=what, limit=limits.MAX_INDEX_JSON_BYTES)
        return parse_index(data, what=what, bound=limits.MAX_DESCRIPTORS)

    def entries(self) -> list[dict[str, Any]]:
        """``index.json``'s descriptors, as they are written there."""
        return [d.to_json() for d in self.index().manifests]

    def _write_index(self, entries: list[dict[str, Any]]) -> None:
        body = canonical_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
        atomic_write(self.root / "index.json", body)

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
        """The manifest a tag or digest names; a blob there that is no manifest is damage."""
        found = self._find(reference)
        digest = (
            found.digest if found is not None else (reference if reference.startswith("sha256:") else None)
        )
        if digest is None or not self.has_blob(digest):
            return None
        body = self.read_blob(digest, limit=limits.MAX_MANIFEST_BYTES)
        media = found.media_type if found is not None else ""
        return Manifest.read(body, digest=digest, media_type=media, what=f"{self.root}: manifest {digest}",
                             error=DamagedFileError)  # fmt: skip

    def put_manifest(self, manifest: Manifest, tag: str | None = None) -> None:
        """The manifest as a blob, listed in ``index.json``: under ``tag`` (moved there from any
        other manifest), or untagged (a referrer)."""
        self.put_bytes(manifest.body)
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

        def replaced(e: dict[str, Any]) -> bool:
            name = (e.get("annotations") or {}).get(REF_NAME)
            return name == tag if tag else (name is None and e.get("digest") == manifest.digest)

        def order(e: dict[str, Any]) -> tuple[str, str]:  # tags first, by name; then referrers
            return str((e.get("annotations") or {}).get(REF_NAME, "~")), str(e["digest"])

        self._write_index(sorted([*(e for e in self.entries() if not replaced(e)), entry], key=order))

    def referrers(self, subject: str) -> list[Manifest]:
        """The manifests ``index.json`` lists untagged whose ``subject`` is ``subject``; more
        than ``MAX_REFERRERS`` of them is refused."""
        out = []
        for d in self.index().manifests:
            if d.annotation(REF_NAME) is not None:
                continue
            m = self.get_manifest(d.digest)
            if m is not None and m.subject == subject:
                out.append(m)
                if len(out) > limits.MAX_REFERRERS:
                    bound = limits.MAX_REFERRERS
                    msg = f"{self.root}: more than {bound} referrers of {subject}; the limit is {bound}"
                    raise DamagedFileError(msg)
        return out
