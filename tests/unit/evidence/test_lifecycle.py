"""A release's life at the registry (``evidence/lifecycle.py``): the lifecycle document as .NET's
images carry one (the artifact type, the end-of-life annotation that tools read without opening
the document), signed like the provenance when there is a key; the notices of a withdrawal and
a reinstatement, and which withdrawals are in force; and a provenance that differs from this
run's only in the sha256 of the manifest's file (a support date moved) is the same build,
reused, not replaced."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from xpu_release.evidence.attachment import END_OF_LIFE_ANNOTATION, LIFECYCLE_TYPE, Attachment, end_of_life
from xpu_release.evidence.lifecycle import in_force, lifecycle_statement, make_notice, notices_at, read_notice
from xpu_release.evidence.referrers import artifact_manifest, attach, list_referrers
from xpu_release.evidence.reuse import choose
from xpu_release.evidence.signing import ENVELOPE_TYPE, envelope
from xpu_release.oci.model import ImageManifest
from xpu_release.oci.registry import RegistryClient

from ..fake_registry import State, fake_registry
from ..oci.test_registry_client import REPO, client_for
from .test_referrers import CREATED, image
from .test_sign_only_ours import key

SUBJECT = image()


def lifecycle(end: date, *, signed: bool = False) -> Attachment:
    statement = lifecycle_statement("img", "img:1.0", end, SUBJECT.digest)
    if not signed:
        return Attachment(kind="lifecycle", payload=statement)
    return Attachment(kind="lifecycle", payload=envelope(statement, key()), media_type=ENVELOPE_TYPE)


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_the_lifecycle_document_is_laid_out_as_dotnets(signed: bool) -> None:
    doc = lifecycle(date(2026, 3, 31), signed=signed)

    m = artifact_manifest(doc, SUBJECT, CREATED).view
    assert isinstance(m, ImageManifest)

    assert m.artifact_type == LIFECYCLE_TYPE == "application/vnd.microsoft.artifact.lifecycle"
    assert m.annotations[END_OF_LIFE_ANNOTATION] == "2026-03-31T00:00:00Z"
    assert END_OF_LIFE_ANNOTATION == "vnd.microsoft.artifact.lifecycle.end-of-life.date"
    assert m.subject is not None
    assert m.subject.digest == SUBJECT.digest
    assert m.config.artifact_type == ""  # only cosign's bundles name it there
    assert m.layers[0].media_type == (ENVELOPE_TYPE if signed else LIFECYCLE_TYPE)
    assert end_of_life(doc.payload) == "2026-03-31T00:00:00Z"


def test_the_same_date_gives_the_same_bytes_and_another_date_other_bytes() -> None:
    assert lifecycle(date(2026, 3, 31)).payload == lifecycle(date(2026, 3, 31)).payload
    assert lifecycle(date(2026, 3, 31)).payload != lifecycle(date(2026, 4, 30)).payload
    assert end_of_life(b"not json") is None
    assert end_of_life(b'{"predicate": {"endOfLife": 5}}') is None


@pytest.fixture
def registry() -> Iterator[tuple[RegistryClient, State]]:
    with fake_registry() as (host, state):
        client = client_for(host, state)
        client.put_manifest(REPO, SUBJECT.digest, SUBJECT)
        yield client, state


def test_a_new_date_replaces_ours_in_the_index_and_the_listing_carries_the_annotation(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, _ = registry
    attach(client, REPO, SUBJECT, [lifecycle(date(2026, 3, 31))], created=CREATED, spool=tmp_path)
    attach(client, REPO, SUBJECT, [lifecycle(date(2027, 3, 31))], created=CREATED, spool=tmp_path)

    listed = list_referrers(client, REPO, SUBJECT.digest).ours("lifecycle")

    assert [d.annotations[END_OF_LIFE_ANNOTATION] for d in listed] == ["2027-03-31T00:00:00Z"]


# --- notices ---------------------------------------------------------------------------------------


def withdrawal(at: str, reason: str = "it crashes on start") -> Attachment:
    return make_notice("withdrawal", ref="img:1.1", subject=SUBJECT.digest, at=at,
                       by="urn:ci:42", reason=reason).attachment  # fmt: skip


def test_a_notice_reads_back_as_written_and_is_dated_with_its_own_time() -> None:
    att = withdrawal("2026-12-05T10:00:00Z")

    notice = read_notice(att)
    m = artifact_manifest(att, SUBJECT, CREATED).view
    assert isinstance(m, ImageManifest)

    assert notice is not None
    assert (notice.kind, notice.release, notice.at, notice.by, notice.reason) == (
        "withdrawal", "img:1.1", "2026-12-05T10:00:00Z", "urn:ci:42", "it crashes on start")  # fmt: skip
    assert notice.words() == "withdrawn 2026-12-05T10:00:00Z by urn:ci:42: it crashes on start"
    assert m.annotations["org.opencontainers.image.created"] == "2026-12-05T10:00:00Z"
    assert m.artifact_type == "application/vnd.xpu-release.withdrawal.v1+json"


@pytest.mark.parametrize(
    "payload",
    [b"", b"[]", b'{"predicateType": "https://xpu-release.invalid/withdrawal/v1"}',
     b'{"predicateType": "https://xpu-release.invalid/withdrawal/v1", "predicate": {"release": 1}}',
     b'{"predicateType": "https://slsa.dev/provenance/v1",'
     b' "predicate": {"release": "a", "at": "b", "by": "c"}}'],
)  # fmt: skip
def test_what_is_no_notice_of_ours_says_nothing(payload: bytes) -> None:
    assert read_notice(Attachment(kind="withdrawal", payload=payload)) is None


def test_a_withdrawal_is_in_force_until_a_reinstatement_names_it() -> None:
    first = read_notice(withdrawal("2026-12-05T10:00:00Z"))
    assert first is not None
    lifted = make_notice("reinstatement", ref="img:1.1", subject=SUBJECT.digest,
                         at="2026-12-05T09:00:00Z", by="urn:ci:43", undoes=(first.digest,))  # fmt: skip
    again = read_notice(withdrawal("2026-12-06T10:00:00Z", "still crashes"))
    assert again is not None

    assert in_force((first,)) == (first,)
    assert in_force((first, lifted)) == ()  # whatever the clocks said: it names the withdrawal
    assert in_force((first, lifted, again)) == (again,)


def test_the_notices_at_an_endpoint_pass_over_damaged_ones(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, _ = registry
    good = withdrawal("2026-12-05T10:00:00Z")
    damaged = Attachment(kind="reinstatement", payload=b'{"not": "a notice"}')
    attach(client, REPO, SUBJECT, [good, damaged], created=CREATED, spool=tmp_path)

    found = notices_at(client, REPO, SUBJECT.digest)

    assert [n.digest for n in found] == [good.digest]


# --- a provenance the same build made ---------------------------------------------------------------


def provenance(manifest_sha256: str, resolved: str = "r" * 64) -> bytes:
    doc = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "img", "digest": {"sha256": "2" * 64}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "externalParameters": {"manifestSha256": manifest_sha256, "resolvedManifestSha256": resolved},
                "resolvedDependencies": [{"name": "manifest", "digest": {"sha256": manifest_sha256}}],
            },
            "runDetails": {"builder": {"id": "urn:ours"}, "metadata": {}},
        },
    }
    return json.dumps(doc, sort_keys=True).encode()


@pytest.mark.parametrize("signed", [False, True], ids=["no-key", "our-key"])
def test_a_provenance_from_before_a_support_date_moved_is_the_same_build(signed: bool) -> None:
    release_key = key() if signed else None
    before = provenance("a" * 64)
    found = (
        Attachment(kind="provenance", payload=envelope(before, release_key), media_type=ENVELOPE_TYPE)
        if release_key
        else Attachment(kind="provenance", payload=before)
    )

    kept = choose(
        Attachment(kind="provenance", payload=provenance("b" * 64)), found, release_key, run_known=True
    )
    rebuilt = choose(Attachment(kind="provenance", payload=provenance("b" * 64, resolved="s" * 64)), found,
                     release_key, run_known=True)  # fmt: skip

    assert kept.attachment == found
    assert kept.replaced is None
    assert rebuilt.replaced is not None  # another resolved manifest is another build
    assert "resolvedManifestSha256" in rebuilt.replaced


def test_a_provenance_signed_by_another_key_is_not_kept_for_the_same_build() -> None:
    found = Attachment(
        kind="provenance", payload=envelope(provenance("a" * 64), key()), media_type=ENVELOPE_TYPE
    )

    choice = choose(Attachment(kind="provenance", payload=provenance("b" * 64)), found, key(), run_known=True)

    assert choice.replaced is not None
