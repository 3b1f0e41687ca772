"""The documents attached to a release, as values: what kinds there are, their media types, and
one ``Attachment`` (a kind and its exact bytes). Making them is ``attest.py``'s work; attaching
and finding them is ``referrers.py``'s; both, and ``status`` and ``verify``, share these types
without importing the makers (and through them the build and the engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..oci.store import sha256_digest

Kind = Literal["sbom", "provenance", "vex"]
SBOM_TYPE = "application/vnd.cyclonedx+json"
IN_TOTO_TYPE = "application/vnd.in-toto+json"
PROVENANCE_TYPE = IN_TOTO_TYPE
# trivy's VEX discovery (``--vex oci``) reads an OCI 1.1 referrer of the generic in-toto
# artifact type, a bare statement or a DSSE envelope, and picks the VEX one by the layer's
# ``in-toto.io/predicate-type`` annotation; ``cosign attest --type openvex`` names it so.
VEX_TYPE = IN_TOTO_TYPE
OPENVEX_PREDICATE = "https://openvex.dev/ns"
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"
ARTIFACT_TYPES: dict[Kind, str] = {"sbom": SBOM_TYPE, "provenance": PROVENANCE_TYPE, "vex": VEX_TYPE}
KINDS: tuple[Kind, ...] = ("sbom", "provenance")  # what every release carries, in this order
# What a release carries when its gate ran: the exceptions that applied and what it fixed.
ALL_KINDS: tuple[Kind, ...] = (*KINDS, "vex")
SIGNED_KINDS: tuple[Kind, ...] = ("provenance", "vex")  # in-toto statements: signed with a key


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
    def layer_annotations(self) -> dict[str, str]:
        """The VEX's layer names its predicate type, as trivy looks for it (the provenance's
        layer stays as earlier releases attached it, so their reruns add nothing)."""
        return {PREDICATE_ANNOTATION: OPENVEX_PREDICATE} if self.kind == "vex" else {}

    @property
    def digest(self) -> str:
        return sha256_digest(self.payload)
