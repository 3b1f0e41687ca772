"""Content-addressed facts kept in the cache across runs: each is a pure function of a digest,
so it never goes stale and any run (or two at once) may write it.

- ``DigestMap``: one digest → one short text (raw → normalized diff_id, diff_id → our blob,
  blob → the diff_id it unpacks to), written atomically;
- ``remember_config`` / ``known_config``: an image's config by its id (its sha256), for the
  steps that need its exact bytes (normalizing, pushing).

One map here is not of that kind, and says so: ``ObservedMap`` keeps what was *seen* happen to
a digest (when and by whom an image was built), which no digest determines.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..files import sha256_file
from ..guard.writing import write_bytes
from ..settings import cache_dir


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``: a blob's or a manifest's digest, an image's id."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_json(data: object) -> bytes:
    """JSON with sorted keys and no spaces: the same data always gives the same bytes (image
    configs, artifact manifests, referrers indexes, SBOMs, provenance, DSSE envelopes)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def holds(path: Path, digest: str) -> bool:
    """``path`` exists and its bytes hash to ``digest`` (``sha256:<hex>``)."""
    return path.is_file() and "sha256:" + sha256_file(path) == digest


class DigestMap:
    """A digest → text map in ``<cache>/<name>``, one file per key."""

    def __init__(self, name: str) -> None:
        self.folder = cache_dir() / name  # made by the first ``put`` (guard/writing.py)

    def _path(self, key: str) -> Path:
        return self.folder / key.replace(":", "-")

    def get(self, key: str) -> str | None:
        path = self._path(key)
        try:
            return path.read_text().strip() or None
        except OSError:
            return None

    def digest(self, key: str) -> str | None:
        """The value at ``key`` if it is a well-formed ``sha256:<64 hex>``."""
        value = self.get(key)
        return value if value and value.startswith("sha256:") and len(value) == 71 else None

    def put(self, key: str, value: str) -> None:
        write_bytes(self._path(key), value.encode(), within=cache_dir(), what="cache entry")


class ObservedMap(DigestMap):
    """A digest → text map of observations, not functions of the digest: the last one wins (a
    rebuild that gives the same image id records its own run). Whatever was published from an
    observation (a provenance) is reused as published, never made again from a newer one."""


def _config_path(image_id: str) -> Path:
    return cache_dir() / "configs" / (image_id.split(":")[1] + ".json")


def remember_config(config: bytes) -> str:
    """Keep an image's config; return its id (the sha256 of the bytes)."""
    image_id = sha256_digest(config)
    write_bytes(_config_path(image_id), config, within=cache_dir(), what="image config")
    return image_id


def known_config(image_id: str) -> bytes | None:
    """The exact bytes of ``image_id``'s config, if kept (and intact)."""
    path = _config_path(image_id)
    return path.read_bytes() if holds(path, image_id) else None
