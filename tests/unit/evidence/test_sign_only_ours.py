"""The release key signs only what this run made. A document found at an endpoint is outside
data: reused only when it is provably the statement (or SBOM) this run makes, never signed as
found (``reuse.choose``)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.reuse import Choice, choose
from xpu_release.evidence.signing import ENVELOPE_TYPE, Signer, envelope, signed_by, statement_of

SUBJECT = "2" * 64


def statement(**run: Any) -> bytes:
    details = {"builder": {"id": run.get("builder", "urn:ours")}, "metadata": {"invocationId": "x@y"}}
    if "started" in run:
        details["metadata"] |= {"startedOn": run["started"], "finishedOn": run["started"]}
    doc = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "img", "digest": {"sha256": run.get("subject", SUBJECT)}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {"buildDefinition": {"externalParameters": {"ref": "img:1"}}, "runDetails": details},
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def key(kind: str = "ed25519") -> Signer:
    from xpu_release.evidence.signing import _keyid

    private: Any = ec.generate_private_key(ec.SECP256R1())
    if kind == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    return Signer(key=private, keyid=_keyid(private.public_key()))


def prov(payload: bytes, signer: Signer | None = None) -> Attachment:
    if signer is None:
        return Attachment(kind="provenance", payload=payload)
    return Attachment(kind="provenance", payload=envelope(payload, signer), media_type=ENVELOPE_TYPE)


def signed_statement(att: Attachment, signer: Signer) -> bytes | None:
    assert signed_by(att.payload, signer.verifier())
    return statement_of(att.payload)


OURS = statement(started="2026-12-01T00:00:00Z")


# --- the attack: a forged statement, signed by another key or by none ---------------------------


@pytest.mark.parametrize(
    "forged",
    [
        pytest.param(statement(builder="urn:attacker", started="2026-12-01T00:00:00Z"), id="builder"),
        pytest.param(statement(subject="6" * 64, started="2026-12-01T00:00:00Z"), id="subject"),
        pytest.param(OURS.replace(b'"ref":"img:1"', b'"ref":"img:evil"'), id="parameters"),
    ],
)
@pytest.mark.parametrize("signed_by_other", [True, False], ids=["other-key", "unsigned"])
def test_a_forged_provenance_is_replaced_by_ours_never_signed_as_found(
    forged: bytes, signed_by_other: bool
) -> None:
    release_key = key()
    found = prov(forged, key() if signed_by_other else None)

    choice = choose(prov(OURS), found, release_key, run_known=True)

    assert signed_statement(choice.attachment, release_key) == OURS
    assert choice.replaced


@pytest.mark.parametrize("run_known", [True, False])
def test_a_statement_differing_only_in_run_facts_is_reused_only_when_our_key_signed_it(
    run_known: bool,
) -> None:
    # Another runner of ours built the same image id: its builder and times differ from ours.
    release_key = key()
    theirs = statement(builder="urn:other-runner", started="2026-11-30T00:00:00Z")

    by_us = choose(prov(OURS), prov(theirs, release_key), release_key, run_known=run_known)
    by_other = choose(prov(OURS), prov(theirs, key()), release_key, run_known=run_known)
    unsigned = choose(prov(OURS), prov(theirs), release_key, run_known=run_known)

    assert by_us.attachment == prov(theirs, release_key)
    assert by_us.replaced is None
    assert signed_statement(by_other.attachment, release_key) == OURS
    assert signed_statement(unsigned.attachment, release_key) == OURS


def test_our_own_statement_found_unsigned_is_signed_and_an_ecdsa_envelope_of_ours_is_kept() -> None:
    ecdsa = key("ecdsa")
    earlier = prov(OURS, ecdsa)  # ECDSA signatures differ each time: the found one must stay

    assert choose(prov(OURS), earlier, ecdsa, run_known=True) == Choice(attachment=earlier)
    made = choose(prov(OURS), prov(OURS), ecdsa, run_known=True)
    assert signed_statement(made.attachment, ecdsa) == OURS
    assert made.replaced is None


def test_without_a_key_nothing_is_signed_and_only_the_unknowable_may_differ() -> None:
    theirs = statement(builder="urn:the-builder", started="2026-11-30T00:00:00Z")

    assert choose(prov(OURS), prov(theirs), None, run_known=False).attachment == prov(theirs)
    assert choose(prov(OURS), prov(theirs), None, run_known=True).attachment == prov(OURS)
    forged = statement(subject="6" * 64)
    assert choose(prov(OURS), prov(forged), None, run_known=False).attachment == prov(OURS)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"payloadType":"application/vnd.in-toto+json","signatures":[]}',  # no payload
        b'{"payloadType":"application/vnd.in-toto+json","payload":"%%%","signatures":[]}',
        b'{"payloadType":"application/vnd.in-toto+json","payload":7,"signatures":{}}',
        b"not json at all",
        b'["a","list"]',
    ],
)
def test_a_damaged_found_provenance_is_replaced_with_a_reason(payload: bytes) -> None:
    release_key = key()

    choice = choose(prov(OURS), Attachment(kind="provenance", payload=payload), release_key, run_known=True)

    assert signed_statement(choice.attachment, release_key) == OURS
    assert choice.replaced


def test_an_sbom_is_reused_only_byte_for_byte() -> None:
    ours = Attachment(kind="sbom", payload=b'{"components":[]}')
    edited = Attachment(kind="sbom", payload=b'{"components":[{"name":"evil"}]}')

    assert choose(ours, ours, key(), run_known=True) == Choice(attachment=ours)
    replaced = choose(ours, edited, key(), run_known=True)
    assert replaced.attachment == ours
    assert replaced.replaced == "it is not the sbom this image gives"


def test_the_envelope_payload_is_base64_of_exactly_our_statement() -> None:
    release_key = key()
    made = choose(prov(OURS), None, release_key, run_known=True).attachment

    assert base64.b64decode(json.loads(made.payload)["payload"]) == OURS


# --- what cosign reads: no key id in the envelope ----------------------------------------------


def with_keyid(att: Attachment, keyid: str) -> Attachment:
    doc = json.loads(att.payload)
    doc["signatures"] = [{**s, "keyid": keyid} for s in doc["signatures"]]
    return Attachment(kind=att.kind, payload=json.dumps(doc).encode(), media_type=ENVELOPE_TYPE)


def test_our_envelope_names_no_key_id_as_cosign_attest_writes_it() -> None:
    # cosign's bundle verifier derives its own key id from the public key and skips every
    # signature whose non-empty keyid differs (tests/integration/test_interop.py runs it).
    signed = prov(OURS, key())

    assert [s["keyid"] for s in json.loads(signed.payload)["signatures"]] == [""]


@pytest.mark.parametrize("statement_of_found", [OURS, statement(builder="urn:other", started="2026-11-30")])
def test_an_envelope_of_ours_that_names_a_key_id_is_wrapped_again_with_the_same_signature(
    statement_of_found: bytes,
) -> None:
    # Earlier releases wrote keyid "sha256:<hex of the key's DER>": our key signed the statement,
    # so it is ours to wrap again; an Ed25519 signature comes out byte for byte the same.
    release_key = key()
    earlier = with_keyid(prov(statement_of_found, release_key), "sha256:" + "ab" * 32)

    choice = choose(prov(OURS), earlier, release_key, run_known=True)

    assert signed_statement(choice.attachment, release_key) == statement_of_found
    again = json.loads(choice.attachment.payload)["signatures"]
    assert again == [{"keyid": "", "sig": json.loads(earlier.payload)["signatures"][0]["sig"]}]


def test_a_key_id_in_an_envelope_of_another_key_earns_it_nothing() -> None:
    release_key = key()
    theirs = with_keyid(prov(OURS, key()), "")

    choice = choose(prov(OURS), theirs, release_key, run_known=True)

    assert signed_statement(choice.attachment, release_key) == OURS
    assert choice.attachment != theirs
