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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DamagedFileError, OutputError
from .registry import OCI_INDEX, Manifest
from .store import atomic_write, canonical_json, holds, sha256_digest

REF_NAME = "org.opencontainers.image.ref.name"
LAYOUT_VERSION = {"imageLayoutVersion": "1.0.0"}


@dataclass(frozen=True)
class Layout:
    root: Path

    def blob_path(self, digest: str) -> Path:
        algorithm, _, hexpart = digest.partition(":")
        if algorithm != "sha256" or len(hexpart) != 64 or not all(c in "0123456789abcdef" for c in hexpart):
            msg = f"{self.root}: {digest!r} is not a sha256 digest"
            raise DamagedFileError(msg)
        return self.root / "blobs" / "sha256" / hexpart

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
        """It is a layout this reader knows (``--from oci:DIR``)."""
        try:
            marker = json.loads((self.root / "oci-layout").read_text())
        except (OSError, ValueError):
            msg = f"{self.root}: not an OCI image layout (no readable oci-layout file)"
            raise ConfigError(msg) from None
        if not isinstance(marker, dict) or not str(marker.get("imageLayoutVersion", "")).startswith("1."):
            msg = f"{self.root}/oci-layout: image layout version {marker!r} is not 1.x"
            raise DamagedFileError(msg)

    # --- blobs ---------------------------------------------------------------------------------

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

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

    def read_blob(self, digest: str, limit: int = 64 << 20) -> bytes:
        path = self.blob_path(digest)
        try:
            data = path.read_bytes() if path.stat().st_size <= limit else b""
        except OSError:
            msg = f"{self.root}: blob {digest} is missing"
            raise DamagedFileError(msg) from None
        if sha256_digest(data) != digest:
            msg = f"{self.root}: blob {digest} is not what its digest says"
            raise DamagedFileError(msg)
        return data

    # --- index.json ----------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.root / "index.json").is_file()

    def entries(self) -> list[dict[str, Any]]:
        try:
            data = json.loads((self.root / "index.json").read_text())
        except (OSError, ValueError):
            msg = f"{self.root}/index.json: missing or not JSON"
            raise DamagedFileError(msg) from None
        manifests = data.get("manifests") if isinstance(data, dict) else None
        return [m for m in manifests if isinstance(m, dict)] if isinstance(manifests, list) else []

    def _write_index(self, entries: list[dict[str, Any]]) -> None:
        body = canonical_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
        atomic_write(self.root / "index.json", body)

    def resolve(self, reference: str) -> str | None:
        """The digest a tag (or a digest) names in ``index.json``."""
        for e in self.entries():
            notes = e.get("annotations")
            name = notes.get(REF_NAME) if isinstance(notes, dict) else None
            if reference in (str(e.get("digest")), name):
                return str(e.get("digest"))
        return None

    def get_manifest(self, reference: str) -> Manifest | None:
        """The manifest a tag or digest names; a blob there that is no JSON object is damage."""
        digest = self.resolve(reference) if not reference.startswith("sha256:") else reference
        if digest is None or not self.has_blob(digest):
            return None
        body = self.read_blob(digest)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            msg = f"{self.root}: {digest} is listed as a manifest but is not a JSON object"
            raise DamagedFileError(msg)
        return Manifest(digest=digest, media_type=str(data.get("mediaType") or ""), body=body)

    def put_manifest(self, manifest: Manifest, tag: str | None = None) -> None:
        """The manifest as a blob, listed in ``index.json``: under ``tag`` (moved there from any
        other manifest), or untagged (a referrer)."""
        self.put_bytes(manifest.body)
        data = manifest.data
        entry: dict[str, Any] = {"mediaType": manifest.media_type, "digest": manifest.digest,
                                 "size": len(manifest.body)}  # fmt: skip
        if data.get("artifactType"):
            entry["artifactType"] = data["artifactType"]
        notes = dict(data.get("annotations") or {}) if not tag else {}
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
        """The manifests ``index.json`` lists whose ``subject`` is ``subject``."""
        out = []
        for e in self.entries():
            notes = e.get("annotations")
            if isinstance(notes, dict) and REF_NAME in notes:
                continue
            m = self.get_manifest(str(e.get("digest")))
            if m is not None and (m.data.get("subject") or {}).get("digest") == subject:
                out.append(m)
        return out
