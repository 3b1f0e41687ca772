"""cosign's two layouts of a signed attestation, made from the very DSSE envelope the release key
signed (``signing.py``), so that ``cosign verify-attestation --key`` finds what xpu-release
attaches. Structures as sigstore/cosign writes them (read in its source; cosign itself does not
run here):

- **the ``.att`` tag** (cosign 2.x's default, the only place its ``verify-attestation`` reads):
  ``sha256-<hex of the image manifest digest>.att`` in the image's repository, an OCI image
  manifest whose layers are the DSSE envelopes (``application/vnd.dsse.envelope.v1+json``),
  each annotated ``predicateType`` and ``dev.cosignproject.cosign/signature`` (empty for an
  attestation: the signature is inside the envelope; cosign's reader fails without the
  annotation). ``pkg/oci/static``, ``pkg/oci/mutate``, ``pkg/oci/empty``; its config is the
  image config go-containerregistry gives an image of those layers.
- **a Sigstore bundle v0.3 referrer** (cosign >= 2.5 ``--new-bundle-format``, 3.x's default):
  ``{"mediaType", "verificationMaterial": {"publicKey": {"hint"}}, "dsseEnvelope"}`` in
  protobuf-specs' JSON form, the hint being the base64 sha256 of the public key's DER (as
  ``cosign verify`` computes it); no transparency-log entry, as signed offline. Attached like
  the other documents (``referrers.py``), kinds ``provenance-bundle`` and ``vex-bundle``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from ..guard.reading import loads
from ..oci.registry import OCI_MANIFEST, Manifest
from ..oci.store import canonical_json, sha256_digest
from .attachment import BUNDLE_TYPE, BUNDLES, PREDICATES, Attachment
from .signing import ENVELOPE_TYPE, Verifier

SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
PREDICATE_TYPE_ANNOTATION = "predicateType"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


def att_tag(subject: str) -> str:
    """cosign's tag for the attestations of ``subject`` (an image manifest digest)."""
    return subject.replace(":", "-") + ".att"


def key_hint(verifier: Verifier) -> str:
    """The base64 sha256 of the public key's DER (SubjectPublicKeyInfo), as cosign writes it."""
    from cryptography.hazmat.primitives import serialization

    der = verifier.key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def bundle(signed: Attachment, verifier: Verifier) -> Attachment:
    """``signed`` (a DSSE envelope of ours) as a Sigstore bundle v0.3, key-based."""
    envelope = json.loads(signed.payload)
    doc = {
        "mediaType": BUNDLE_TYPE,
        "verificationMaterial": {"publicKey": {"hint": key_hint(verifier)}},
        "dsseEnvelope": {
            "payload": envelope["payload"],
            "payloadType": envelope["payloadType"],
            "signatures": [{"sig": s["sig"], "keyid": s.get("keyid", "")} for s in envelope["signatures"]],
        },
    }
    return Attachment(kind=BUNDLES[signed.kind], payload=canonical_json(doc))


def bundles_for(attachments: tuple[Attachment, ...], verifier: Verifier) -> tuple[Attachment, ...]:
    """A bundle for each signed statement among ``attachments``."""
    return tuple(bundle(a, verifier) for a in signed_statements(attachments))


def envelope_of(bundle_payload: bytes) -> bytes | None:
    """The DSSE envelope a bundle holds, in the JSON form ``signing.py`` reads (None: not a
    bundle with an envelope)."""
    try:
        doc = loads(bundle_payload)
        env = doc["dsseEnvelope"]
        sigs = [{"keyid": s.get("keyid", ""), "sig": s["sig"]} for s in env["signatures"]]
        out = {"payload": env["payload"], "payloadType": env["payloadType"], "signatures": sigs}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return canonical_json(out)


def _layer(att: Attachment) -> dict[str, Any]:
    return {
        "mediaType": ENVELOPE_TYPE,
        "size": len(att.payload),
        "digest": att.digest,
        "annotations": {PREDICATE_TYPE_ANNOTATION: PREDICATES[att.kind], SIGNATURE_ANNOTATION: ""},
    }


def att_manifest(signed: tuple[Attachment, ...], found: Manifest | None) -> tuple[Manifest, bytes]:
    """The ``.att`` manifest holding ``signed`` (our envelopes), and its config. Layers of
    ``found`` (the tag as it is) that are not ours and not of our predicate types are kept, as
    ``cosign attest`` appends; ours replace their earlier selves."""
    ours = {a.digest for a in signed}
    types = {PREDICATES[a.kind] for a in signed}
    kept: list[dict[str, Any]] = []
    for layer in found.layers if found is not None else ():
        predicate = layer.annotation(PREDICATE_TYPE_ANNOTATION)
        if layer.annotations and layer.digest not in ours and predicate not in types:
            kept.append(layer.to_json())
    layers = [*kept, *(_layer(a) for a in signed)]
    # The config go-containerregistry computes for an image of these layers (an empty image,
    # appended to): each layer uncompressed as it is, so its diff id is its digest.
    config = canonical_json({
        "architecture": "", "created": "0001-01-01T00:00:00Z", "os": "",
        "config": {}, "history": [{"created": "0001-01-01T00:00:00Z"} for _ in layers],
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"] for layer in layers]},
    })  # fmt: skip
    body = canonical_json({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "size": len(config), "digest": sha256_digest(config)},
        "layers": layers,
    })  # fmt: skip
    return Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body), config


def signed_statements(attachments: tuple[Attachment, ...]) -> tuple[Attachment, ...]:
    """The envelopes among ``attachments`` that go into the ``.att`` manifest."""
    return tuple(a for a in attachments if a.kind in BUNDLES and a.media_type == ENVELOPE_TYPE)
