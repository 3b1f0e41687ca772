"""The documents attached to a release, as values: what kinds there are, their media types, and
one ``Attachment`` (a kind and its exact bytes). Making them is ``attest.py``'s work; attaching
and finding them is ``referrers.py``'s; both, and ``status`` and ``verify``, share these types
without importing the makers (and through them the build and the engine).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Literal

from ..oci.store import sha256_digest

Kind = Literal[
    "sbom", "provenance", "vex", "provenance-bundle", "vex-bundle", "spdx", "lifecycle", "withdrawal",
    "reinstatement",
]  # fmt: skip
SBOM_TYPE = "application/vnd.cyclonedx+json"
SPDX_TYPE = "application/spdx+json"  # the SPDX SBOM, attached when the manifest asks for it
IN_TOTO_TYPE = "application/vnd.in-toto+json"
PROVENANCE_TYPE = IN_TOTO_TYPE
# trivy's VEX discovery (``--vex oci``) reads an OCI 1.1 referrer of the generic in-toto
# artifact type, a bare statement or a DSSE envelope, and picks the VEX one by the layer's
# ``in-toto.io/predicate-type`` annotation; ``cosign attest --type openvex`` names it so.
VEX_TYPE = IN_TOTO_TYPE
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
OPENVEX_PREDICATE = "https://openvex.dev/ns"
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"
# cosign >= 2.5 with its new bundle format (the default in 3.x) finds an attestation as an OCI
# 1.1 referrer holding a Sigstore bundle v0.3 (``cosign.py``), with these manifest annotations
# (sigstore/cosign ``pkg/oci/remote/write.go``, ``WriteAttestationNewBundleFormat``).
BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
BUNDLE_CONTENT_ANNOTATION = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
# The end-of-life date as .NET's images carry it (and Azure's scanners read it): an OCI 1.1
# referrer of this artifact type, the date (RFC 3339) in this annotation of its manifest.
LIFECYCLE_TYPE = "application/vnd.microsoft.artifact.lifecycle"
END_OF_LIFE_ANNOTATION = "vnd.microsoft.artifact.lifecycle.end-of-life.date"
# Our notices that a release was withdrawn, or reinstated (``lifecycle.py``).
WITHDRAWAL_TYPE = "application/vnd.xpu-release.withdrawal.v1+json"
REINSTATEMENT_TYPE = "application/vnd.xpu-release.reinstatement.v1+json"
ARTIFACT_TYPES: dict[Kind, str] = {
    "sbom": SBOM_TYPE, "provenance": PROVENANCE_TYPE, "vex": VEX_TYPE,
    "provenance-bundle": BUNDLE_TYPE, "vex-bundle": BUNDLE_TYPE, "spdx": SPDX_TYPE,
    "lifecycle": LIFECYCLE_TYPE, "withdrawal": WITHDRAWAL_TYPE, "reinstatement": REINSTATEMENT_TYPE,
}  # fmt: skip
KINDS: tuple[Kind, ...] = ("sbom", "provenance")  # what every release carries, in this order
# In-toto statements: signed with a key (cosign's layouts hold only those of ``BUNDLES``).
SIGNED_KINDS: tuple[Kind, ...] = ("provenance", "vex", "lifecycle")
# A signed statement is also published as cosign's bundle: the same envelope, wrapped.
BUNDLES: dict[Kind, Kind] = {"provenance": "provenance-bundle", "vex": "vex-bundle"}
BUNDLED: dict[Kind, Kind] = {b: k for k, b in BUNDLES.items()}
PREDICATES: dict[Kind, str] = {"provenance": SLSA_PROVENANCE, "vex": OPENVEX_PREDICATE}
# Every document a publish attaches: the VEX when the gate ran, the bundles when there is a key,
# SPDX when asked for, the lifecycle document when the manifest gives a support date.
ALL_KINDS: tuple[Kind, ...] = (*KINDS, "vex", "provenance-bundle", "vex-bundle", "spdx", "lifecycle")
# The notices ``withdraw`` and ``reinstate`` attach: the release's state, not its documents.
NOTICE_KINDS: tuple[Kind, ...] = ("withdrawal", "reinstatement")


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """One document about one image: what it is (``kind``), its exact bytes, and their media
    type when it is not the artifact type (a signed provenance is a DSSE envelope)."""

    kind: Kind
    payload: bytes
    media_type: str = ""
    created: str = ""  # its artifact manifest's created annotation, when the document has its own date

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
    def manifest_annotations(self) -> dict[str, str]:
        """A bundle's artifact manifest says what it holds, as cosign writes it; the lifecycle
        document's says its end-of-life date, as .NET's does."""
        if self.kind == "lifecycle":
            end = end_of_life(self.payload)
            return {END_OF_LIFE_ANNOTATION: end} if end else {}
        if self.kind not in BUNDLED:
            return {}
        return {
            BUNDLE_CONTENT_ANNOTATION: "dsse-envelope",
            BUNDLE_PREDICATE_ANNOTATION: PREDICATES[BUNDLED[self.kind]],
        }

    @property
    def digest(self) -> str:
        return sha256_digest(self.payload)


def statement(payload: bytes) -> dict[str, Any] | None:
    """The in-toto statement a document holds, bare or in a DSSE envelope, not verified (None:
    neither)."""
    try:
        doc = json.loads(payload)
        if isinstance(doc, dict) and "payloadType" in doc:
            doc = json.loads(base64.b64decode(str(doc.get("payload")), validate=True))
    except (ValueError, binascii.Error, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def end_of_life(payload: bytes) -> str | None:
    """The end-of-life date a lifecycle document states (RFC 3339), signed or not."""
    doc = statement(payload)
    predicate = doc.get("predicate") if doc else None
    end = predicate.get("endOfLife") if isinstance(predicate, dict) else None
    return end if isinstance(end, str) else None
