"""Documents attached to an image by digest (OCI 1.1), against an in-process fake registry:
the referrers tag schema where the registry has no API, the API where it has one, no
duplicates on a rerun, stale attachments of ours replaced, and everybody else's kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import WireError
from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.referrers import (
    EMPTY,
    KIND_ANNOTATION,
    artifact_manifest,
    attach,
    fetch_attachment,
    list_referrers,
    referrers_tag,
)
from xpu_release.oci.registry import OCI_INDEX, Manifest, RegistryClient, sha256_digest

from ..fake_registry import State, fake_registry
from ..oci.test_registry_client import REPO, client_for

CREATED = "2025-03-01T00:00:00Z"


def image() -> Manifest:
    config = {"digest": "sha256:" + "c" * 64, "size": 1}
    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": config, "layers": []}).encode()  # fmt: skip
    return Manifest(
        digest=sha256_digest(body), media_type="application/vnd.oci.image.manifest.v1+json", body=body
    )


SBOM = Attachment(kind="sbom", payload=b'{"bomFormat":"CycloneDX"}')
PROVENANCE = Attachment(kind="provenance", payload=b'{"_type":"https://in-toto.io/Statement/v1"}')


@pytest.fixture
def registry() -> Iterator[tuple[RegistryClient, State]]:
    with fake_registry() as (host, state):
        yield client_for(host, state), state


def tag_index(state: State, subject: Manifest) -> list[dict[str, object]]:
    _media, body = state.manifests[(REPO, referrers_tag(subject.digest))]
    return json.loads(body)["manifests"]  # type: ignore[no-any-return]


def test_an_attachment_is_an_oci_artifact_whose_subject_is_the_image() -> None:
    subject = image()

    m = json.loads(artifact_manifest(SBOM, subject, CREATED).body)

    assert m["artifactType"] == "application/vnd.cyclonedx+json"
    assert m["config"] == {"mediaType": "application/vnd.oci.empty.v1+json", "digest": sha256_digest(EMPTY),
                           "size": 2}  # fmt: skip
    assert m["layers"] == [{"mediaType": "application/vnd.cyclonedx+json", "digest": SBOM.digest,
                            "size": len(SBOM.payload)}]  # fmt: skip
    assert m["subject"] == {
        "mediaType": subject.media_type,
        "digest": subject.digest,
        "size": len(subject.body),
    }
    assert m["annotations"][KIND_ANNOTATION] == "sbom"


def test_without_the_referrers_api_the_tag_schema_index_lists_both(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, state = registry
    subject = image()

    pushed = attach(client, REPO, subject, [SBOM, PROVENANCE], created=CREATED, spool=tmp_path)

    entries = tag_index(state, subject)
    assert sorted(e["digest"] for e in entries) == sorted(m.digest for m in pushed)  # type: ignore[type-var]
    assert {e["artifactType"] for e in entries} == {"application/vnd.cyclonedx+json",
                                                     "application/vnd.in-toto+json"}  # fmt: skip
    assert state.manifests[(REPO, referrers_tag(subject.digest))][0] == OCI_INDEX
    found = list_referrers(client, REPO, subject.digest)
    assert found.via == "tag"
    assert fetch_attachment(client, REPO, found.ours("sbom")[0], "sbom") == SBOM
    assert state.blobs[SBOM.digest] == SBOM.payload


def test_a_rerun_adds_no_duplicate(registry: tuple[RegistryClient, State], tmp_path: Path) -> None:
    client, state = registry
    subject = image()
    attach(client, REPO, subject, [SBOM, PROVENANCE], created=CREATED, spool=tmp_path)
    before = dict(state.manifests)

    attach(client, REPO, subject, [SBOM, PROVENANCE], created=CREATED, spool=tmp_path)

    assert len(tag_index(state, subject)) == 2
    assert state.manifests == before  # nothing written again


def test_a_stale_attachment_of_ours_is_replaced_and_foreign_ones_are_kept(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, state = registry
    subject = image()
    old = Attachment(kind="sbom", payload=b'{"bomFormat":"CycloneDX","old":true}')
    attach(client, REPO, subject, [old], created=CREATED, spool=tmp_path)
    # A signature someone else attached, listed in the same index.
    foreign = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "f" * 64,
               "size": 10, "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json"}  # fmt: skip
    entries = [*tag_index(state, subject), foreign]
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    state.manifests[(REPO, referrers_tag(subject.digest))] = (OCI_INDEX, body)

    attach(client, REPO, subject, [SBOM, PROVENANCE], created=CREATED, spool=tmp_path)

    digests = {e["digest"] for e in tag_index(state, subject)}
    assert artifact_manifest(old, subject, CREATED).digest not in digests
    assert foreign["digest"] in digests
    assert artifact_manifest(SBOM, subject, CREATED).digest in digests
    assert len(digests) == 3


def test_a_referrer_the_tag_index_lists_many_times_is_listed_once(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, state = registry
    subject = image()
    attach(client, REPO, subject, [SBOM, PROVENANCE], created=CREATED, spool=tmp_path)
    entries = tag_index(state, subject)
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries * 50}).encode()
    state.manifests[(REPO, referrers_tag(subject.digest))] = (OCI_INDEX, body)

    found = list_referrers(client, REPO, subject.digest)

    assert [d.digest for d in found.descriptors] == [e["digest"] for e in entries]  # as first listed


def test_a_registry_with_the_referrers_api_lists_them_itself(tmp_path: Path) -> None:
    with fake_registry(State(referrers_api=True)) as (host, state):
        client = client_for(host, state)
        subject = image()

        pushed = attach(client, REPO, subject, [SBOM, PROVENANCE], created=CREATED, spool=tmp_path)
        found = list_referrers(client, REPO, subject.digest)

    assert (REPO, referrers_tag(subject.digest)) not in state.manifests  # no tag schema written
    assert found.via == "api"
    assert {d.digest for d in found.descriptors} == {m.digest for m in pushed}


def test_a_damaged_attachment_is_named(registry: tuple[RegistryClient, State], tmp_path: Path) -> None:

    client, state = registry
    subject = image()
    attach(client, REPO, subject, [SBOM], created=CREATED, spool=tmp_path)
    state.blobs[SBOM.digest] = b'{"bomFormat":"CycloneDX","flipped":1}'
    desc = list_referrers(client, REPO, subject.digest).ours("sbom")[0]

    with pytest.raises(WireError, match="is not what its digest says"):
        fetch_attachment(client, REPO, desc, "sbom")


def test_status_says_what_each_listed_document_is(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    from dataclasses import replace

    from xpu_release.evidence.signing import ENVELOPE_TYPE
    from xpu_release.release.model.record import ReleaseRecord
    from xpu_release.release.model.serving import _document_states

    client, state = registry
    subject = image()
    client.put_manifest(REPO, subject.digest, subject)
    signed = Attachment(kind="provenance", payload=b'{"payloadType":"x"}', media_type=ENVELOPE_TYPE)
    sbom_m, prov_m = attach(client, REPO, subject, [SBOM, signed], created=CREATED, spool=tmp_path)
    record = ReleaseRecord(
        ref="x:1", manifest="m", manifest_sha256="m", inputs_sha256="i", tested_image_id="sha256:" + "c" * 64,
        digest=subject.digest, published_at="t", complete=True, floating_moved=(),
        attachments={"sbom": sbom_m.digest, "provenance": prov_m.digest},
    )  # fmt: skip

    def states(rec: ReleaseRecord | None) -> dict[str, str]:
        recorded = rec.attachments if rec is not None else None
        return dict(_document_states(client, REPO, list_referrers(client, REPO, subject.digest), recorded))

    assert states(record) == {"sbom": "ok", "provenance": "ok"}
    other = replace(record, attachments={**record.attachments, "provenance": "sha256:" + "9" * 64})
    assert states(other) == {"sbom": "ok", "provenance": "foreign"}
    attach(client, REPO, subject, [PROVENANCE], created=CREATED, spool=tmp_path)  # unsigned, not recorded
    assert states(None) == {"sbom": "ok", "provenance": "unsigned"}
    del state.manifests[(REPO, sbom_m.digest)]  # listed by the index, no longer served
    assert states(record)["sbom"] == "missing"
