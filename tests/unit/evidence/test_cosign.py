"""cosign finds what the release key signed: the same DSSE envelope in cosign's ``.att`` tag
(cosign 2.x) and as a Sigstore bundle v0.3 referrer (cosign >= 2.5's new bundle format). The
expected structures are taken from sigstore/cosign's source (cosign does not run here):
``pkg/oci/static`` (layer annotations), ``pkg/oci/empty`` (an OCI manifest and config),
``pkg/oci/remote/write.go`` (``WriteAttestationNewBundleFormat``: the bundle's artifact type,
manifest annotations), ``cmd/cosign/cli/verify/verify_bundle.go`` (the key hint). The bundle is
parsed with sigstore-protobuf-specs' own generated model."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import serialization

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.cosign import att_manifest, att_tag, bundle, bundles_for, envelope_of
from xpu_release.evidence.referrers import artifact_manifest, is_referrers_tag
from xpu_release.evidence.signing import ENVELOPE_TYPE, envelope, pae
from xpu_release.oci.registry import OCI_MANIFEST, Manifest

from .test_sign_only_ours import OURS, key

SUBJECT = Manifest(digest="sha256:" + "7" * 64, media_type=OCI_MANIFEST, body=b'{"schemaVersion":2}')
VEX_STATEMENT = json.dumps({"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://openvex.dev/ns",
                            "subject": [], "predicate": {}}).encode()  # fmt: skip


def signed(kind: str = "provenance", algorithm: str = "ed25519") -> tuple[Attachment, object]:
    signer = key(algorithm)
    payload = OURS if kind == "provenance" else VEX_STATEMENT
    return Attachment(kind=kind, payload=envelope(payload, signer), media_type=ENVELOPE_TYPE), signer  # type: ignore[arg-type]


def test_the_att_tag_is_cosigns_tag_for_the_image_digest() -> None:
    assert att_tag("sha256:" + "a" * 64) == "sha256-" + "a" * 64 + ".att"
    assert is_referrers_tag(att_tag("sha256:" + "a" * 64))  # not a release's tag in `catalog`


def test_the_att_manifest_holds_each_envelope_as_cosign_annotates_it() -> None:
    provenance, _ = signed("provenance")
    vex, _ = signed("vex")

    manifest, config = att_manifest((provenance, vex), None)

    data = json.loads(manifest.body)
    assert data["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert data["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert data["config"]["digest"] == "sha256:" + hashlib.sha256(config).hexdigest()
    assert [layer["mediaType"] for layer in data["layers"]] == ["application/vnd.dsse.envelope.v1+json"] * 2
    assert [layer["digest"] for layer in data["layers"]] == [provenance.digest, vex.digest]
    assert [layer["annotations"] for layer in data["layers"]] == [
        {"predicateType": "https://slsa.dev/provenance/v1", "dev.cosignproject.cosign/signature": ""},
        {"predicateType": "https://openvex.dev/ns", "dev.cosignproject.cosign/signature": ""},
    ]
    # go-containerregistry's config of an image of these layers: uncompressed, diff id = digest.
    assert json.loads(config)["rootfs"] == {"type": "layers", "diff_ids": [provenance.digest, vex.digest]}
    assert att_manifest((provenance, vex), None)[0].digest == manifest.digest  # the same bytes again


def test_the_att_manifest_keeps_what_others_attested_and_replaces_our_earlier_envelope() -> None:
    earlier, _ = signed("provenance")
    now, _ = signed("provenance")
    notes = {"predicateType": "https://cyclonedx.org/bom", "dev.cosignproject.cosign/signature": ""}
    theirs = {"mediaType": ENVELOPE_TYPE, "digest": "sha256:" + "c" * 64, "size": 10, "annotations": notes}
    found, _ = att_manifest((earlier,), None)
    body = json.dumps(
        {**json.loads(found.body), "layers": [theirs, *json.loads(found.body)["layers"]]}
    ).encode()
    found = Manifest(digest=found.digest, media_type=OCI_MANIFEST, body=body)

    manifest, _ = att_manifest((now,), found)

    assert [layer["digest"] for layer in json.loads(manifest.body)["layers"]] == [
        theirs["digest"],
        now.digest,
    ]


@pytest.mark.parametrize("algorithm", ["ed25519", "ecdsa"])
def test_the_bundle_parses_with_sigstores_model_and_its_envelope_verifies_with_the_key(
    algorithm: str,
) -> None:
    from sigstore_protobuf_specs.dev.sigstore.bundle.v1 import Bundle

    provenance, signer = signed("provenance", algorithm)
    public = signer.verifier()  # type: ignore[attr-defined]

    made = bundle(provenance, public)
    parsed = Bundle.from_dict(json.loads(made.payload))  # its own parser, its own validation

    assert made.kind == "provenance-bundle"
    assert parsed.media_type == "application/vnd.dev.sigstore.bundle.v0.3+json"
    der = public.key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert (
        parsed.verification_material.public_key.hint
        == base64.b64encode(hashlib.sha256(der).digest()).decode()
    )
    assert list(parsed.verification_material.tlog_entries) == []  # signed offline: no log entry
    env = parsed.dsse_envelope
    assert env.payload_type == "application/vnd.in-toto+json"
    assert env.payload == OURS
    (signature,) = env.signatures
    assert public.verify(pae(env.payload_type, env.payload), signature.sig)
    assert envelope_of(made.payload) is not None
    assert json.loads(envelope_of(made.payload) or b"") == json.loads(provenance.payload)  # the same envelope


def test_the_bundle_referrer_is_written_as_cosign_writes_it() -> None:
    provenance, signer = signed("provenance")
    (made,) = bundles_for((provenance, Attachment(kind="sbom", payload=b"{}")), signer.verifier())  # type: ignore[attr-defined]

    data = json.loads(artifact_manifest(made, SUBJECT, "2026-12-03T00:00:00Z").body)

    assert data["artifactType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    empty = "sha256:" + hashlib.sha256(b"{}").hexdigest()
    assert data["config"] == {
        "mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2,
        "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json",
    }  # fmt: skip
    assert data["layers"][0]["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    notes = data["annotations"]
    assert notes["dev.sigstore.bundle.content"] == "dsse-envelope"
    assert notes["dev.sigstore.bundle.predicateType"] == "https://slsa.dev/provenance/v1"
    assert "org.opencontainers.image.created" in notes
    assert data["subject"]["digest"] == SUBJECT.digest


def test_an_unsigned_statement_gets_no_bundle_and_no_att_layer() -> None:
    plain = Attachment(kind="provenance", payload=OURS)
    _, signer = signed()

    assert bundles_for((plain,), signer.verifier()) == ()  # type: ignore[attr-defined]
    assert envelope_of(b"not json") is None
    assert envelope_of(b'{"mediaType": "x"}') is None
