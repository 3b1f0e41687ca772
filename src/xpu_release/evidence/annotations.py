"""The standard annotations of a release's image manifest (OCI image-spec ``annotations.md``):
``org.opencontainers.image.version``, ``.created``, ``.source``, ``.base.name`` and
``.base.digest``.

They are part of the manifest, so of its digest, and so are a pure function of the release's
declared inputs, as apko and ko make an image: ``created`` is the release's SOURCE_DATE_EPOCH,
never the time of the push; the base is the lock's pin; ``source`` is the URL
``images/<image>/image.yaml`` gives, if any. Nothing here depends on git history: the same tree
gives the same digest clean or dirty, under any commit and outside git, so a child's lock that
pins its parent by digest stays true across commits. The commit a release was made from belongs
to its provenance (``evidence/attest.git_revision``), not to its bytes.
"""

from __future__ import annotations

from pathlib import Path

from ..image.build import source_date_epoch
from ..image.lockfile import Lock
from ..image.normalize import iso
from ..image.render import image_source
from ..manifest import ImageSpec

PREFIX = "org.opencontainers.image."


def image_annotations(root: Path, spec: ImageSpec, lock: Lock) -> dict[str, str]:
    """The annotations of ``spec``'s image manifest."""
    out = {PREFIX + "version": spec.version, PREFIX + "created": iso(source_date_epoch(spec))}
    name, _, digest = lock.base.partition("@")
    if digest:
        out[PREFIX + "base.name"] = name
        out[PREFIX + "base.digest"] = digest
    source = image_source(root, spec.image)
    if source:
        out[PREFIX + "source"] = source
    return out
