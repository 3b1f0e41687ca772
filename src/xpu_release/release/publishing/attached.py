"""What a manifest brings along in a mirror: its blobs (``blobs_of``), and, for an attachment
of several manifests, those manifests. A referrer may be an image index (OCI 1.1 lets an index
carry a ``subject``; other tools push one for an attachment of several parts). ``mirror``
copies it as any referrer, with what it lists: ``members`` reads those manifests (and those of
an index among them) from the source, each checked, before anything is written.

An index at the version tag (a platformed release) is the release itself: ``mirror`` copies
each image it names with that image's own referrers; an index attached to an image is not one
of its platforms, and never stops the copy."""

from __future__ import annotations

from typing import ClassVar, Protocol

from ...errors import NotFoundError, ReleaseError
from ...guard import limits
from ...guard.shown import shown
from ...oci.model import Descriptor, ImageIndex, is_sha256
from ...oci.registry import Manifest


class Reads(Protocol):
    """Where the members are read from (a mirror's source side); ``wrong``: the error of its
    answer that cannot be used (a registry's: exit 7; a layout's damage: exit 12)."""

    wrong: ClassVar[type[ReleaseError]]

    @property
    def name(self) -> str: ...

    def get_manifest(self, reference: str) -> Manifest | None: ...


def is_index(manifest: Manifest) -> bool:
    return isinstance(manifest.view, ImageIndex)


def blobs_of(side: Reads, manifest: Manifest) -> list[tuple[str, int]]:
    """The blobs a manifest read from ``side`` lists (each descriptor was checked when it was
    read; an attached index lists none: its members do); one that is not sha256 (a sha512
    layer) is named, the side's ``wrong`` error: only sha256 blobs are copied."""
    out = [] if is_index(manifest) else manifest.blobs()
    bad = next((d for d, _ in out if not is_sha256(d)), None)
    if bad is not None:
        msg = f"{side.name}: {manifest.digest} lists the blob {shown(bad, 80)}; only sha256 blobs are copied"
        raise side.wrong(msg)
    return out


def members(side: Reads, referrers: list[Manifest]) -> list[Manifest]:
    """Every manifest the indexes among ``referrers`` list, and those lists' own (an index in
    one), each once, read from ``side``: the deepest first, so each is in place before the
    index that lists it. NotFoundError naming one that is listed but not there; the side's
    ``wrong`` error when there are more than ``MAX_REFERRERS``."""
    seen = {m.digest for m in referrers}
    levels: list[list[Manifest]] = []
    frontier = [m for m in referrers if is_index(m)]
    while frontier:
        level = []
        for index in frontier:
            for d in _listed(index):
                if d.digest not in seen:
                    seen.add(d.digest)
                    level.append(_member(side, index, d, len(seen)))
        levels.append(level)
        frontier = [m for m in level if is_index(m)]
    return [m for level in reversed(levels) for m in level]


def _listed(index: Manifest) -> tuple[Descriptor, ...]:
    view = index.view
    return view.manifests if isinstance(view, ImageIndex) else ()


def _member(side: Reads, index: Manifest, d: Descriptor, count: int) -> Manifest:
    """The manifest ``d`` (the ``count``-th met) that ``index`` lists, read from ``side``."""
    bound = limits.MAX_REFERRERS
    if count > bound:
        msg = f"{side.name}: attached indexes list more than {bound} manifests; the limit is {bound}"
        raise side.wrong(msg)
    found = side.get_manifest(d.digest)
    if found is None:
        msg = f"{side.name}: {d.digest}, listed by the attached index {index.digest}, is not there"
        raise NotFoundError(msg)
    return found
