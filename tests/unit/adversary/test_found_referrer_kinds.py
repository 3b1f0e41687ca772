"""A referrer that is an image index. mirrors.md: "every referrer of it (SBOM, provenance, VEX,
cosign's bundles, and anything else attached) with its blobs"; OCI 1.1 lets an index carry a
``subject`` (an attachment with several manifests, as other tools push). ``_blobs`` asks each
referrer for ``Manifest.image``, which refuses an index: the whole mirror stops with exit 7,
"sha256:… is an image index; multi-platform copies are not supported yet", though the release
is one platform and nothing said what the index is."""

from __future__ import annotations

import json
from pathlib import Path

from ..cli.hostile import REF, REPO, a_users_error, invoke, publish_to, registries_for
from ..fake_registry import fake_registry
from ..guard.strategies import OCI_INDEX, OCI_MANIFEST, digest_of


def test_an_attached_index_does_not_stop_the_mirror(repo: Path, tmp_path: Path) -> None:
    with fake_registry() as (host, state):
        image = publish_to(state)
        state.referrers_api = True
        subject = {"mediaType": OCI_MANIFEST, "digest": image, "size": len(state.manifests[(REPO, image)][1])}
        attached = json.dumps(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "artifactType": "application/x.example",
             "manifests": [], "subject": subject}
        ).encode()  # fmt: skip
        state.manifests[(REPO, digest_of(attached))] = (OCI_INDEX, attached)
        entry = {"mediaType": OCI_INDEX, "digest": digest_of(attached), "size": len(attached)}
        listing = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [entry]}
        state.faults.referrers_body = json.dumps(listing).encode()
        argv = ["--registries", str(registries_for(tmp_path, host)), "mirror", REF,
                "--from", f"{host}/{REPO}", "--to", f"oci:{tmp_path / 'target'}"]  # fmt: skip
        cache = {"XPU_RELEASE_CACHE": str(tmp_path / "cache")}
        result = invoke(repo, argv, env=cache, unstick=state.stopped.set)

    a_users_error(result)
    assert "multi-platform" not in result.stderr, result.stderr  # the release is one platform
    assert result.exit_code == 0, result.stderr
