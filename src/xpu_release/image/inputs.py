"""What an image is made from, worked out once per command and handed down: the manifest (its
``ImageSpec``), the Dockerfile rendered from it (checked against the committed one), the lock
(checked current) and the digest of them all, which the image carries as its inputs label.

A release renders the Dockerfile, parses the lock and hashes the inputs here, once; the build,
build avoidance, the SBOM and the dry run's plan all read the one ``BuildInputs``. A platformed
release has one per platform (``each``): one Dockerfile, each platform's section of the lock,
and each its own digest."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import ManifestError
from ..manifest import ImageSpec
from ..manifest.platforms import AMD64, Platform
from ..manifest.registries import Registries
from .layerform import GZIP, LayerForm
from .layers import RULES_VERSION
from .lock import Lock, Locks, load_locks
from .render import Rendered, image_layers, require_current


def inputs_sha256(
    spec: ImageSpec, dockerfile: str, lock: Lock, platform: Platform = AMD64, form: LayerForm = GZIP
) -> str:
    """Everything the image is made from: the resolved manifest, the Dockerfile, the lock and the
    base digest it pins (and the rules that normalize layers); of a platformed release's image,
    the platform too (its lock section and base image are already its own); of an eStargz image,
    its layers' form (``LayerForm.basis``)."""
    basis: dict[str, object] = {
        "manifest": spec.content_hash,
        "dockerfile": hashlib.sha256(dockerfile.encode()).hexdigest(),
        "lock": [[p.name, p.version, p.sha256] for layer in lock.layers for p in layer.packages],
        "base": lock.base_digest,
        "layer_rules": RULES_VERSION,
    }
    if spec.platformed:  # only then: every image of linux/amd64 alone keeps its inputs digest
        basis["platform"] = platform.name
    if (layers := form.basis()) is not None:  # likewise: a gzip image keeps its digest
        basis["layers"] = layers
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def require_pinned(spec: ImageSpec) -> None:
    """Every artifact has its sha256: a build refuses an unchecked download (said before the
    Dockerfile or the lock are looked at, the first thing to fix)."""
    unpinned = [c.id for c in spec.of_kind("artifact") if not c.sha256]
    if unpinned:
        msg = (
            f"{spec.manifest_path}: components {', '.join(unpinned)} have no sha256 (assumed "
            "artifacts); pin their checksums before building"
        )
        raise ManifestError(msg)


@dataclass(frozen=True, kw_only=True)
class BuildInputs:
    spec: ImageSpec
    dockerfile: Rendered  # checked current against the committed Dockerfile
    lock: Lock  # checked current against the manifest's pins and base (the platform's section)
    digest: str  # ``inputs_sha256`` of the three: the image's inputs label
    platform: Platform = AMD64  # the platform the image is built for
    form: LayerForm = GZIP  # how its own layers are written (``image.yaml``'s ``layers``)

    @property
    def ref(self) -> str:
        """The image's tag in the engine (``Platform.local_ref``)."""
        return self.platform.local_ref(self.spec.ref)

    @classmethod
    def of(cls, spec: ImageSpec, dockerfile: Rendered, lock: Lock, platform: Platform = AMD64,
           form: LayerForm = GZIP) -> BuildInputs:  # fmt: skip
        """From a Dockerfile and a lock already checked (a release's render and lock stages)."""
        digest = inputs_sha256(spec, dockerfile.text, lock, platform, form)
        return cls(spec=spec, dockerfile=dockerfile, lock=lock, digest=digest, platform=platform, form=form)

    @classmethod
    def read(cls, root: Path, spec: ImageSpec, registries: Registries) -> BuildInputs:
        """Checked in the order a person fixes them: artifacts pinned, the Dockerfile current,
        the lock current. Of the first platform (``each``: every platform's)."""
        return cls.each(root, spec, registries)[0]

    @classmethod
    def each(
        cls, root: Path, spec: ImageSpec, registries: Registries, locks: Locks | None = None
    ) -> tuple[BuildInputs, ...]:
        """Every platform's inputs, in the manifest's order (``locks``: already read and checked)."""
        require_pinned(spec)
        dockerfile = require_current(root, spec, registries)
        locks = locks or load_locks(root, spec)
        form = image_layers(root, spec)
        return tuple(cls.of(spec, dockerfile, locks.of(p), p, form) for p in spec.platforms)
