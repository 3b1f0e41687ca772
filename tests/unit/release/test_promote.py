"""``promote`` between two channels of fake registries (staging and production, three endpoints
each): one digest copied with every referrer (SBOM, signed provenance and its cosign bundle and
``.att`` tag, VEX, lifecycle), the version tags written once every endpoint holds it, verified,
``latest`` moved last; a rerun copies nothing; a withdrawn release (exit 16), a failed or stale
gate (exit 14) and a target holding another image (exit 9) are refused with nothing copied; a
copy that breaks at one endpoint shows nowhere, and a rerun finishes; the record keeps where and
when each set of endpoints got the release."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.cosign import att_tag, bundles_for
from xpu_release.evidence.lifecycle import lifecycle_statement
from xpu_release.evidence.referrers import EMPTY, EMPTY_TYPE, attach, findable, list_referrers
from xpu_release.evidence.signing import ENVELOPE_TYPE, envelope
from xpu_release.evidence.vex import CONTEXT
from xpu_release.oci.registry import OCI_MANIFEST, Manifest, sha256_digest
from xpu_release.release.model.record import read
from xpu_release.release.steering import promote as promoting

from ..evidence.test_sign_only_ours import key
from ..helpers import run
from .line import LOGIN, PASSWORD, Channel, channel, held, hold, image_of, manifests, publish, recorded

ROOT = Path(__file__).resolve().parents[3]
VERSIONS = ["1.0", "1.1"]
SIGNER = key()


def vex(review_by: str) -> bytes:
    statements = [
        {"vulnerability": {"name": "CVE-2026-0001"}, "status": "not_affected",
         "justification": "vulnerable_code_not_present", "review_by": review_by}
    ]  # fmt: skip
    document = {"@context": CONTEXT, "statements": statements}
    return json.dumps({"predicateType": "https://openvex.dev/ns", "predicate": document}).encode()


def evidence(ch: Channel, version: str, spool: Path, review_by: str = "") -> None:
    """What a signed, gated release with a support date carries beyond its SBOM."""
    _, image = image_of(version)
    provenance = Attachment(
        kind="provenance", payload=envelope(b'{"_type":"x"}', SIGNER), media_type=ENVELOPE_TYPE
    )
    end = lifecycle_statement("demo", f"demo:{version}", date(2027, 6, 30), image.digest)
    bundles = bundles_for((provenance,), SIGNER.verifier())
    docs = [
        provenance,
        *bundles,
        Attachment(kind="vex", payload=vex(review_by or str(date.today() + timedelta(days=200)))),
        Attachment(kind="lifecycle", payload=end),
    ]
    empty = {"mediaType": EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY)}
    subject = {"mediaType": OCI_MANIFEST, "digest": image.digest, "size": len(image.body)}
    sig = {
        "artifactType": "application/x.example.sig",
        "config": empty,
        "layers": [empty],
        "subject": subject,
    }
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, **sig}).encode()
    foreign = Manifest(digest=sha256_digest(body), media_type=OCI_MANIFEST, body=body)  # another tool's
    for ep in ch.endpoints():
        client, repo = ch.client(ep), ch.repo(ep)
        attach(client, repo, image, docs, created="2026-01-01T00:00:00Z", spool=spool)
        client.put_manifest(repo, foreign.digest, foreign)
        findable(client, repo, image, [foreign])


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict[str, object]], dict[str, str]]:
    """What staging's endpoints hold once demo 1.0 and 1.1 are released there (signed, gated,
    with a support date), made once for this module (0.7 s of CPU); and the digests."""
    tmp = tmp_path_factory.mktemp("staged")
    with channel(ROOT, tmp, "staging", "staging") as staging:
        digests = publish(staging, VERSIONS, tmp / "spool").digests
        for v in VERSIONS:
            evidence(staging, v, tmp / "spool")
        return held(staging), digests


@pytest.fixture
def channels(
    repo: Path, tmp_path: Path, staged: tuple[dict[str, dict[str, object]], dict[str, str]]
) -> Iterator[tuple[Channel, Channel, dict[str, str]]]:
    """demo 1.0 and 1.1 released to staging (signed, gated, with a support date): fresh fakes
    holding what ``staged`` made; production serves nothing of them."""
    manifests(repo, VERSIONS)
    contents, digests = staged
    with (
        channel(repo, tmp_path, "staging", "staging") as staging,
        channel(repo, tmp_path, "production") as prod,
    ):
        hold(staging, contents)
        yield staging, prod, dict(digests)


def promote(staging: Channel, prod: Channel, ref: str = "demo:1.1", *more: str) -> tuple[int, str, str]:
    args = ("--registries", str(prod.file), "promote", ref, "--from", str(staging.file), *more, *LOGIN)
    result = run(prod.root, *args, input=PASSWORD)
    return result.exit_code, result.stdout, result.stderr


def referrers(ch: Channel, digest: str) -> dict[str, list[str]]:
    out = {}
    for ep in ch.endpoints():
        found = list_referrers(ch.client(ep), ch.repo(ep), digest)
        out[ep.name] = sorted(d.digest for d in found.descriptors)
    return out


def test_promote_copies_one_digest_with_every_referrer_then_the_tags(
    channels: tuple[Channel, Channel, dict[str, str]],
) -> None:
    staging, prod, digests = channels
    assert set(prod.served("1.1").values()) == {None}

    code, out, err = promote(staging, prod, "demo:1.1", "--json")
    again = promote(staging, prod, "demo:1.1", "--json")
    verified = run(prod.root, "--registries", str(prod.file), "verify", "demo:1.1", *LOGIN, input=PASSWORD)

    assert code == 0, err
    report = json.loads(out)
    assert set(prod.served("1.1").values()) == {digests["1.1"]}
    assert set(prod.served("latest").values()) == {digests["1.1"]}  # moved last
    assert set(prod.served("1.1-latest").values()) == {digests["1.1"]}  # and the line's tag
    assert (
        sorted(r.rpartition(":")[2] for r in report["floating_moved"]) == ["1.1-latest"] * 3 + ["latest"] * 3
    )
    (staged,) = set(map(tuple, referrers(staging, digests["1.1"]).values()))
    assert len(staged) == 6  # SBOM, provenance, its bundle, VEX, lifecycle, and another tool's
    assert set(map(tuple, referrers(prod, digests["1.1"]).values())) == {staged}
    src, dst = staging.endpoints()[0], prod.endpoints()[2]
    assert prod.client(dst).head_manifest(prod.repo(dst), att_tag(digests["1.1"])) == staging.client(
        src
    ).head_manifest(staging.repo(src), att_tag(digests["1.1"]))
    assert {tuple(c["kinds"]) for c in report["copies"]} == {
        ("lifecycle", "provenance", "provenance-bundle", "sbom", "vex")
    }
    assert all(c["att"] for c in report["copies"])
    assert again[0] == 0, again[2]
    assert [c["blobs_copied"] for c in json.loads(again[1])["copies"]] == [0, 0, 0]  # resumable: all there
    assert verified.exit_code == 0, verified.stderr
    assert set(staging.served("latest").values()) == {digests["1.1"]}  # staging untouched


def test_the_record_keeps_where_and_when_each_set_of_endpoints_got_it(
    channels: tuple[Channel, Channel, dict[str, str]],
) -> None:
    staging, prod, digests = channels
    path = recorded(staging, "1.1", digests["1.1"])

    code, _, err = promote(staging, prod)
    again = promote(staging, prod)

    assert code == 0, err
    assert again[0] == 0, again[2]
    record = read(path)
    assert [e.endpoint for e in record.endpoints] == ["public", "vpc/cn-beijing", "vpc/cn-wulanchabu"]
    assert record.endpoints[0].host == staging.endpoints()[0].host  # its publish: to staging
    (promotion,) = record.promotions  # a rerun is the same promotion, not a second one
    assert promotion.source == str(staging.file)
    assert promotion.channel == str(prod.file)
    assert promotion.endpoints == ("public", "vpc/cn-beijing", "vpc/cn-wulanchabu")
    assert promotion.at.endswith("Z")


def test_without_a_record_here_one_is_made_from_what_the_registries_say(
    channels: tuple[Channel, Channel, dict[str, str]],
) -> None:
    staging, prod, digests = channels

    code, out, err = promote(staging, prod, "demo:1.1", "--json")

    assert code == 0, err
    record = read(Path(json.loads(out)["record"]))
    assert record.digest == digests["1.1"]
    assert record.complete
    assert [e.host for e in record.endpoints] == [ep.host for ep in prod.endpoints()]
    assert set(record.attachments) == {"sbom", "provenance", "provenance-bundle", "vex", "lifecycle"}


# --- refused, nothing copied ----------------------------------------------------------------------


def nothing_at_production(prod: Channel, digest: str) -> bool:
    return set(prod.served("1.1").values()) == {None} and all(
        prod.client(ep).head_manifest(prod.repo(ep), digest) is None for ep in prod.endpoints()
    )


def test_a_withdrawn_release_is_refused(channels: tuple[Channel, Channel, dict[str, str]]) -> None:
    staging, prod, digests = channels
    run(staging.root, "--registries", str(staging.file), "withdraw", "demo:1.1", "--reason", "bad", *LOGIN,
        input=PASSWORD)  # fmt: skip

    code, _, err = promote(staging, prod)

    assert code == 16, err
    assert "withdrawn" in err
    assert nothing_at_production(prod, digests["1.1"])


def test_a_release_withdrawn_at_production_is_not_promoted_again(
    channels: tuple[Channel, Channel, dict[str, str]],
) -> None:
    staging, prod, _ = channels
    assert promote(staging, prod)[0] == 0
    run(prod.root, "--registries", str(prod.file), "withdraw", "demo:1.1", "--reason", "bad in production",
        *LOGIN, input=PASSWORD)  # fmt: skip
    latest = prod.served("latest")

    code, _, err = promote(staging, prod)  # staging knows nothing of the withdrawal

    assert code == 16, err
    assert "bad in production" in err
    assert prod.served("latest") == latest  # not moved back onto it


def test_a_release_whose_gate_failed_is_refused(channels: tuple[Channel, Channel, dict[str, str]]) -> None:
    staging, prod, digests = channels
    recorded(
        staging, "1.1", digests["1.1"], scan={"status": "failed", "reason": "threshold high", "findings": []}
    )

    code, _, err = promote(staging, prod)

    assert code == 14, err
    assert "failed its vulnerability gate" in err
    assert nothing_at_production(prod, digests["1.1"])


def test_a_release_whose_vex_exception_is_past_its_review_is_refused(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path
) -> None:
    staging, prod, digests = channels
    evidence(staging, "1.1", tmp_path / "spool", review_by="2026-01-31")  # replaces the VEX

    code, _, err = promote(staging, prod)

    assert code == 14, err
    assert "CVE-2026-0001" in err
    assert "2026-01-31" in err
    assert nothing_at_production(prod, digests["1.1"])


def test_a_vex_that_is_not_one_is_refused_as_the_vex_file_would_be(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The VEX staging serves is read by the same typed reader as the repository's VEX file
    # (evidence/vex.vex_statements): an exception with no review date, which a reader of raw JSON
    # passed over as "nothing to review", means the gate's conclusion cannot be checked.
    staging, prod, digests = channels
    undated = {"vulnerability": {"name": "CVE-2026-0001"}, "status": "not_affected",
               "justification": "vulnerable_code_not_present"}  # fmt: skip
    document = {"@context": CONTEXT, "statements": [undated]}
    payload = json.dumps({"predicateType": "https://openvex.dev/ns", "predicate": document}).encode()
    monkeypatch.setattr(sys.modules[__name__], "vex", lambda _: payload)
    evidence(staging, "1.1", tmp_path / "spool")  # replaces the VEX

    code, _, err = promote(staging, prod)

    assert code == 14, err
    assert "the VEX staging serves is not one" in err
    assert "review_by" in err
    assert nothing_at_production(prod, digests["1.1"])


def test_a_target_whose_version_tag_holds_another_image_is_refused(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path
) -> None:
    staging, prod, digests = channels
    publish(prod, ["1.0"], tmp_path / "spool", latest=False)
    _, other = image_of("1.0")
    ep = prod.endpoints()[1]
    prod.client(ep).put_manifest(prod.repo(ep), "1.1", other)  # one region holds another image at 1.1

    code, _, err = promote(staging, prod)

    assert code == 9, err
    assert other.digest in err
    assert prod.served("1.1") == {"public": None, "vpc/cn-beijing": other.digest, "vpc/cn-wulanchabu": None}
    assert all(prod.client(e).head_manifest(prod.repo(e), digests["1.1"]) is None for e in prod.endpoints())


def test_a_copy_broken_at_one_endpoint_shows_nowhere_and_a_rerun_finishes(
    channels: tuple[Channel, Channel, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    staging, prod, digests = channels
    real = promoting.mirror
    region = prod.endpoints()[2]

    def broken(source, target, *args, **kwargs):  # type: ignore[no-untyped-def]
        if target.client.endpoint.name == region.name:
            from xpu_release.errors import WireError

            msg = f"{region.host}: connection reset"
            raise WireError(msg)
        return real(source, target, *args, **kwargs)

    monkeypatch.setattr(promoting, "mirror", broken)
    code, _, err = promote(staging, prod)
    halfway = prod.served("1.1")
    monkeypatch.setattr(promoting, "mirror", real)
    rerun = promote(staging, prod, "demo:1.1", "--json")

    assert code == 7, err
    assert set(halfway.values()) == {None}  # no version tag anywhere until every endpoint holds it
    assert rerun[0] == 0, rerun[2]
    copied = {c["target"].split("/")[0]: c["blobs_copied"] for c in json.loads(rerun[1])["copies"]}
    assert copied[region.host] > 0
    assert sum(copied.values()) == copied[region.host]  # the others only proven, nothing sent again
    assert set(prod.served("1.1").values()) == {digests["1.1"]}


def test_a_record_path_that_cannot_be_written_is_refused_before_any_change(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path
) -> None:
    # Found by an attack pass (issue 53): promote copied and tagged at every production endpoint,
    # then exit 13 "cannot write the release record (File exists)".
    staging, prod, digests = channels
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")

    code, _, err = promote(staging, prod, "demo:1.1", "--record", str(blocker / "1.1.json"))

    assert code == 13, err
    assert "nothing was changed" in err
    assert nothing_at_production(prod, digests["1.1"])


def test_the_record_of_another_release_is_refused_before_any_change(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path
) -> None:
    staging, prod, digests = channels
    other = recorded(staging, "1.0", digests["1.0"])

    code, _, err = promote(staging, prod, "demo:1.1", "--record", str(other))

    assert code == 3, err
    assert "record of demo:1.0, not of demo:1.1" in err
    assert nothing_at_production(prod, digests["1.1"])


def test_a_release_staging_serves_without_its_evidence_is_refused_before_any_copy(
    repo: Path, tmp_path: Path
) -> None:
    # Found by an attack pass (issue 53): the image was copied and the immutable version tag
    # written at every production endpoint, then exit 7 "promoted, but the targets do not verify".
    manifests(repo, ["1.0"])
    blobs, image = image_of("1.0")
    with (
        channel(repo, tmp_path, "staging", "staging") as staging,
        channel(repo, tmp_path, "production") as prod,
    ):
        for ep in staging.endpoints():  # the image and its version tag, no SBOM, no provenance
            client, name = staging.client(ep), staging.repo(ep)
            for data in blobs:
                path = tmp_path / sha256_digest(data).replace(":", "-")
                path.write_bytes(data)
                client.upload_blob(name, sha256_digest(data), path)
            client.put_manifest(name, "1.0", image)

        code, _, err = promote(staging, prod, "demo:1.0")

        assert code == 7, err
        assert "without its sbom and provenance" in err
        assert all(
            prod.client(ep).head_manifest(prod.repo(ep), image.digest) is None for ep in prod.endpoints()
        )
        assert set(prod.served("1.0").values()) == {None}


def test_a_record_folder_planted_as_a_link_is_refused_before_any_change(
    channels: tuple[Channel, Channel, dict[str, str]], tmp_path: Path
) -> None:
    # Found by a second adversary: the check followed the link the write then refused, so
    # production was changed first, then exit 13.
    staging, prod, digests = channels
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (prod.root / "out" / "releases").mkdir(parents=True)
    (prod.root / "out" / "releases" / "demo").symlink_to(elsewhere)

    code, _, err = promote(staging, prod)

    assert code == 13, err
    assert "symbolic link" in err
    assert nothing_at_production(prod, digests["1.1"])
    assert list(elsewhere.iterdir()) == []
