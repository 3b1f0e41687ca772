"""The documents attached to a release, as values: what kinds there are, their media types, and
one ``Attachment`` (a kind and its exact bytes). Making them is ``attest.py``'s work; attaching
and finding them is ``referrers.py``'s; both, and ``status`` and ``verify``, share these types
without importing the makers (and through them the build and the engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..oci.store import sha256_digest

Kind = Literal["sbom", "provenance"]
SBOM_TYPE = "application/vnd.cyclonedx+json"
PROVENANCE_TYPE = "application/vnd.in-toto+json"
ARTIFACT_TYPES: dict[Kind, str] = {"sbom": SBOM_TYPE, "provenance": PROVENANCE_TYPE}
KINDS: tuple[Kind, ...] = ("sbom", "provenance")  # what every release carries, in this order


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """One document about one image: what it is (``kind``), its exact bytes, and their media
    type when it is not the artifact type (a signed provenance is a DSSE envelope)."""

    kind: Kind
    payload: bytes
    media_type: str = ""

    @property
    def artifact_type(self) -> str:
        return ARTIFACT_TYPES[self.kind]

    @property
    def layer_type(self) -> str:
        return self.media_type or self.artifact_type

    @property
    def digest(self) -> str:
        return sha256_digest(self.payload)
