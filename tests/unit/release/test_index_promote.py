"""``promote`` of a platformed release (issue 43) from a staging channel to production (three
fake registries each): the index, each platform's image with its blobs and its own SBOM and
provenance, the version tag last, verified; an exception due for review in the VEX of the arm64
image (not of the index, which has no VEX) refuses the promotion with nothing copied."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from xpu_release.errors import VulnerabilityGateFailed
from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.referrers import attach, list_referrers
from xpu_release.evidence.vex import CONTEXT
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.release.model.line import Line
from xpu_release.release.model.pool import EndpointPool
from xpu_release.release.model.record import ReleaseRecord
from xpu_release.release.publishing.indexpublish import publish_index
from xpu_release.release.publishing.publish import Options
from xpu_release.release.steering.promote import promote

from .fake_release import three_registries
from .platformed import World, logged_in, world


@pytest.fixture
def staged(tmp_path: Path) -> Iterator[tuple[World, ReleaseRecord, EndpointPool]]:
    """kit:25.03 published to staging (the world's registries); production: three empty ones."""
    with world(tmp_path) as w, three_registries(tmp_path / "production.yaml") as (override, _):
        record = publish_index(w.pool(), w.engine, w.builds(), Options(), lambda _: None, "test")  # type: ignore[arg-type]
        registries = load_registries(w.root, str(override))
        yield w, record, EndpointPool(w.spec, registries, logged_in(registries))


def test_the_index_and_each_platform_image_with_its_documents_reach_production(
    staged: tuple[World, ReleaseRecord, EndpointPool], tmp_path: Path
) -> None:
    w, record, production = staged

    done = promote(w.pool(), production, spool=tmp_path / "spool", record=record, today=date(2026, 12, 3),
                   line=Line(Repo(w.root)))  # fmt: skip

    assert done.digest == record.digest
    for t in production.plan.targets:
        client, repo = production.client(t.endpoint), production.repo(t.endpoint)
        assert client.head_manifest(repo, "25.03") == record.digest
        for p in record.platforms:
            assert client.head_manifest(repo, p.digest or "") == p.digest
            assert (
                list_referrers(client, repo, p.digest or "").ours("sbom")[0].digest == p.attachments["sbom"]
            )


def test_an_arm64_exception_due_for_review_refuses_the_promotion(
    staged: tuple[World, ReleaseRecord, EndpointPool], tmp_path: Path
) -> None:
    w, record, production = staged
    client, repo = w.client("public")
    arm64 = client.get_manifest(repo, record.platforms[1].digest or "")
    assert arm64 is not None
    due = {"vulnerability": {"name": "CVE-2026-0001"}, "status": "not_affected",
           "justification": "vulnerable_code_not_present", "review_by": "2026-11-01"}  # fmt: skip
    document = {"@context": CONTEXT, "statements": [due]}
    vex = json.dumps({"predicateType": "https://openvex.dev/ns", "predicate": document})
    attach(client, repo, arm64, [Attachment(kind="vex", payload=vex.encode())],
           created="2026-01-01T00:00:00Z", spool=tmp_path)  # fmt: skip

    with pytest.raises(
        VulnerabilityGateFailed, match="CVE-2026-0001 in its VEX was due for review on 2026-11-01"
    ):
        promote(w.pool(), production, spool=tmp_path / "spool", record=record, today=date(2026, 12, 3),
                line=Line(Repo(w.root)))  # fmt: skip

    for t in production.plan.targets:
        assert production.client(t.endpoint).head_manifest(production.repo(t.endpoint), "25.03") is None
