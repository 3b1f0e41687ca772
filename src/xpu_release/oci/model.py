"""The OCI documents as frozen types, parsed once from their bytes (image-spec ``descriptor.md``,
``manifest.md``, ``image-index.md``), with the bounds of the guarded layer.

A ``Descriptor`` (media type, digest, size, annotations, artifact type, platform), an
``ImageManifest`` (config, layers, subject) and an ``ImageIndex`` (manifests, subject) are what
every module reads; no module walks a manifest's dict by hand. Parsing checks each field's type
where a wrong one would mislead a reader: a size that is no int64 (``1e400``, ``true``, a
400-digit number), ``annotations`` that are not a map of strings, a ``subject`` that is not a
descriptor, more descriptors than ``MAX_DESCRIPTORS``. The refusal names the document and the
field (``oci:/media/usb: sha256:ab…: layers[2].size: …``) and is raised through the caller's
error class (a layout's damage is exit 12, a registry's answer 7).

Fields no reader here uses are not checked, and nothing is re-serialized: a document's bytes
stay what they were (``registry.Manifest`` keeps them); a descriptor keeps the mapping it was
read from (``raw``) so that another tool's entry is written back as that tool wrote it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import DamagedFileError
from ..guard import limits
from ..guard.reading import Fail, is_int, parse_json
from ..guard.shown import shown

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)

# image-spec descriptor.md: algorithm ":" encoded; sha256 is 64 lower-case hex characters.
_DIGEST = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")

_EMPTY: Mapping[str, str] = MappingProxyType({})


class _Bad(Exception):
    """One field of a document that is not what the spec says: ``where`` (a key path) and why."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}" if where else why)


def is_sha256(digest: str) -> bool:
    return bool(_SHA256.fullmatch(digest))


def is_digest(text: str) -> bool:
    """``text`` has the shape of a digest (image-spec: ``algorithm:encoded``; sha256 exactly)."""
    return (
        bool(_DIGEST.fullmatch(text))
        and len(text) <= 200
        and (not text.startswith("sha256:") or is_sha256(text))
    )


def is_media_type(text: str) -> bool:
    """``text`` has the shape of a media type (RFC 6838: ``type/subtype``)."""
    return bool(_MEDIA_TYPE.fullmatch(text))


@dataclass(frozen=True, kw_only=True)
class Platform:
    architecture: str
    os: str
    variant: str = ""


@dataclass(frozen=True, kw_only=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY, compare=False)
    artifact_type: str = ""
    platform: Platform | None = None
    # the mapping it was read from, written back as it was (another tool's entry in an index)
    raw: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False, repr=False)

    def annotation(self, key: str) -> str | None:
        return self.annotations.get(key)

    def to_json(self) -> dict[str, Any]:
        """The descriptor as it was read (a copy, every field kept), or as made here."""
        if self.raw:
            return copy.deepcopy(dict(self.raw))
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


@dataclass(frozen=True, kw_only=True)
class ImageManifest:
    """An image manifest (OCI or Docker v2 schema 2), or an OCI 1.1 artifact manifest."""

    media_type: str
    config: Descriptor
    layers: tuple[Descriptor, ...]
    subject: Descriptor | None = None
    artifact_type: str = ""
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY, compare=False)

    def blobs(self) -> tuple[Descriptor, ...]:
        """The config and every layer."""
        return (self.config, *self.layers)


@dataclass(frozen=True, kw_only=True)
class ImageIndex:
    """An image index (OCI or a Docker manifest list), a referrers answer, or index.json."""

    media_type: str
    manifests: tuple[Descriptor, ...]
    subject: Descriptor | None = None
    artifact_type: str = ""
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY, compare=False)
    # the whole document, as it was read (index.json's fields another tool wrote are kept)
    raw: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class ImageConfig:
    """What is read of an image's config: its labels, its layers' diff_ids and its platform
    (``os``, ``architecture``, ``variant``: "" where it says none)."""

    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY, compare=False)
    diff_ids: tuple[str, ...] = ()
    platform: Platform = Platform(architecture="", os="")


# --- parsing -------------------------------------------------------------------------------------


def _str(data: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        field = f"{where}{key}"
        raise _Bad(field, "missing" if value is None else f"not a string ({type(value).__name__})")
    return value


def _annotations(data: Mapping[str, Any], where: str) -> Mapping[str, str]:
    value = data.get("annotations")
    if value is None:
        return _EMPTY
    if not isinstance(value, dict):
        field = f"{where}annotations"
        raise _Bad(field, f"not a map of strings ({type(value).__name__})")
    for k, v in value.items():
        if not isinstance(v, str):
            field = f"{where}annotations.{shown(k, 80)}"
            raise _Bad(field, f"not a string ({type(v).__name__})")
    return MappingProxyType(dict(value))


def descriptor(data: Any, where: str = "") -> Descriptor:
    """A descriptor from its JSON value; ``_Bad`` naming ``where`` and the field if it is none."""
    if not isinstance(data, dict):
        raise _Bad(where.rstrip("."), f"not a descriptor ({type(data).__name__})")
    media = _str(data, "mediaType", where, required=True)
    if not _MEDIA_TYPE.fullmatch(media):
        field = f"{where}mediaType"
        raise _Bad(field, "not a media type")
    digest = _str(data, "digest", where, required=True)
    if not is_digest(digest):
        field = f"{where}digest"
        sha = digest.startswith("sha256:")
        raise _Bad(field, "not a sha256 digest (64 lower-case hex characters)" if sha else "not a digest")
    size = data.get("size")
    if not is_int(size):
        field = f"{where}size"
        raise _Bad(field, f"not a size (an integer from 0 to 2^63-1; it is {type(size).__name__})")
    platform = data.get("platform")
    if platform is not None:
        if not isinstance(platform, dict):
            field = f"{where}platform"
            raise _Bad(field, f"not an object ({type(platform).__name__})")
        p = f"{where}platform."
        platform = Platform(architecture=_str(platform, "architecture", p), os=_str(platform, "os", p),
                            variant=_str(platform, "variant", p))  # fmt: skip
    return Descriptor(media_type=media, digest=digest, size=size, annotations=_annotations(data, where),
                      artifact_type=_str(data, "artifactType", where), platform=platform,
                      raw=MappingProxyType(data))  # fmt: skip


def _descriptors(data: Mapping[str, Any], key: str, *, required: bool, bound: int) -> tuple[Descriptor, ...]:
    value = data.get(key)
    if value is None and not required:
        return ()
    if not isinstance(value, list):
        raise _Bad(key, "missing" if value is None else f"not a list ({type(value).__name__})")
    if len(value) > bound:
        raise _Bad(key, f"{len(value)} entries; the limit is {bound}")
    return tuple(descriptor(d, f"{key}[{i}].") for i, d in enumerate(value))


def _subject(data: Mapping[str, Any]) -> Descriptor | None:
    return descriptor(data["subject"], "subject.") if data.get("subject") is not None else None


def _document(data: Any, *, index: bool | None, bound: int) -> ImageManifest | ImageIndex:
    if not isinstance(data, dict):
        whole = ""  # the document itself, no field of it
        raise _Bad(whole, f"not a JSON object ({type(data).__name__})")
    version = data.get("schemaVersion")
    if version is not None and not is_int(version, low=2, high=2):
        field = "schemaVersion"
        raise _Bad(field, f"{shown(version, 20)} is not 2 (only schema 2 documents are read)")
    media = _str(data, "mediaType", "")
    subject, artifact, notes = _subject(data), _str(data, "artifactType", ""), _annotations(data, "")
    if ("manifests" in data or media in INDEX_TYPES) if index is None else index:
        return ImageIndex(media_type=media, subject=subject, artifact_type=artifact, annotations=notes,
                          manifests=_descriptors(data, "manifests", required=index is None, bound=bound),
                          raw=MappingProxyType(data))  # fmt: skip
    return ImageManifest(media_type=media, subject=subject, artifact_type=artifact, annotations=notes,
                         config=descriptor(data.get("config"), "config."),
                         layers=_descriptors(data, "layers", required=True,
                                             bound=limits.MAX_DESCRIPTORS))  # fmt: skip


def parse(body: bytes, *, what: str, error: Fail = DamagedFileError) -> ImageManifest | ImageIndex:
    """The manifest or index ``body`` holds; ``error`` naming ``what`` and the field if it is
    neither (not JSON, nested too deep, a field of another type)."""
    if len(body) > limits.MAX_MANIFEST_BYTES:
        msg = f"{what}: {len(body)} bytes; a manifest is at most {limits.MAX_MANIFEST_BYTES}"
        raise error(msg)
    data = parse_json(body, what=what, error=error)
    try:
        return _document(data, index=None, bound=limits.MAX_DESCRIPTORS)
    except _Bad as exc:
        msg = f"{what}: {exc}"
        raise error(msg) from None


def parse_index(data: Any, *, what: str, bound: int, error: Fail = DamagedFileError) -> ImageIndex:
    """An index from its JSON value (index.json, a referrers answer): ``manifests`` may be
    absent (none), never another type, and holds at most ``bound`` descriptors."""
    try:
        found = _document(data, index=True, bound=bound)
    except _Bad as exc:
        msg = f"{what}: {exc}"
        raise error(msg) from None
    assert isinstance(found, ImageIndex)
    return found


def parse_config(body: bytes, *, what: str, error: Fail = DamagedFileError) -> ImageConfig:
    """The labels and diff_ids of an image config (image-spec ``config.md``); ``error`` naming
    ``what`` and the field if they are of another shape."""
    data = parse_json(body, what=what, error=error)
    if not isinstance(data, dict):
        msg = f"{what}: not a JSON object ({type(data).__name__})"
        raise error(msg)
    config, rootfs = data.get("config") or {}, data.get("rootfs") or {}
    labels = config.get("Labels") or {} if isinstance(config, dict) else None
    diff_ids = rootfs.get("diff_ids") or [] if isinstance(rootfs, dict) else None
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        msg = f"{what}: config.Labels is not a map of strings"
        raise error(msg)
    if not isinstance(diff_ids, list) or not all(isinstance(d, str) and is_sha256(d) for d in diff_ids):
        msg = f"{what}: rootfs.diff_ids is not a list of sha256 digests"
        raise error(msg)
    if len(diff_ids) > limits.MAX_DESCRIPTORS:
        msg = f"{what}: rootfs.diff_ids has {len(diff_ids)} entries; the limit is {limits.MAX_DESCRIPTORS}"
        raise error(msg)
    # a platform field that is no string says no platform: it matches none (verify says so)
    platform = Platform(
        **{k: v if isinstance(v := data.get(k), str) else "" for k in ("architecture", "os", "variant")}
    )
    return ImageConfig(labels=MappingProxyType(dict(labels)), diff_ids=tuple(diff_ids), platform=platform)
