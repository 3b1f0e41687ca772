"""``watch`` counts a *withdrawn* patch as superseding the release it patches. When 25.03.1 (the
patch that fixed a high CVE) is withdrawn, ``withdraw`` gives the line's tag back to 25.03
(docs/using/lifecycle.md, test_withdraw_line.py): the users of ``25.03-latest`` pull 25.03
again, with the open CVE. Yet ``watch`` said 25.03 was "superseded" by 25.03.1 and checked nothing,
exit 0: the release the line serves is watched by nobody, and no patch is planned for it.

A withdrawn release supersedes nothing: the release it would have replaced is watched."""

from __future__ import annotations

import json

from xpu_release.evidence.lifecycle import make_notice
from xpu_release.evidence.referrers import attach
from xpu_release.oci.registry import Manifest

from ..helpers import run
from ..release.published_kit import CPU, NS, SDK, TRAINING, World, sbom

TODAY = "2026-12-03"


def withdrawn(w: World, version: str, digest: str, image: str = CPU) -> None:
    """A withdrawal notice of ``image:version`` attached by digest, as ``withdraw`` leaves it."""
    repo = f"{NS}/{image}"
    served = w.client.get_manifest(repo, digest)
    assert isinstance(served, Manifest)
    notice = make_notice("withdrawal", ref=f"{image}:{version}", subject=digest,
                         at="2026-12-01T00:00:00Z", by="ci", reason="it crashes on start")  # fmt: skip
    attach(w.client, repo, served, [notice.attachment], created="", spool=w.spool)


def test_a_withdrawn_patch_does_not_supersede_the_release_it_patches(published: World) -> None:
    w = published
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")  # a fixable high in 25.03
    w.patch_manifest(CPU, "25.03.1", "25.03", "components:\n  accelerate: {version: 1.6.0}\n")
    fixed = tuple((n, "1.6.0" if n == "accelerate" else v) for n, v in TRAINING)
    withdrawn(w, "25.03.1", w.publish(CPU, "25.03.1", sbom(*fixed), salt="patched"))

    result = run(w.root, "--registries", str(w.registries), "watch", f"{CPU}:25.03", "--advisories",
                 str(w.osv), "--today", TODAY, "--json")  # fmt: skip

    (found,) = json.loads(result.stdout)["releases"]
    assert found["state"] != "superseded", f"superseded by the withdrawn {found['superseded_by']}"
    assert found["state"] == "needs a patch"
    assert result.exit_code == 15


def test_a_withdrawn_patch_of_the_base_is_no_base_to_move_a_child_onto(published: World) -> None:
    # A new maintainer's reading (session 8): basewatch took any published patch of the base
    # release as "base-patched", withdrawn or not, so `patch` would move the child onto the
    # release its users were told to stop pulling.
    w = published
    w.patch_manifest(SDK, "2.13.0.1", "2.13.0")
    withdrawn(w, "2.13.0.1", w.publish(SDK, "2.13.0.1", sbom(("torch", "2.13.0+cpu")), salt="2.13.0.1"), SDK)

    result = run(w.root, "--registries", str(w.registries), "watch", "--advisories", str(w.osv),
                 "--today", TODAY, "--json")  # fmt: skip

    found = {r["ref"]: r for r in json.loads(result.stdout)["releases"]}
    training = found[f"{CPU}:25.03"]
    assert not any(r["kind"] == "base-patched" for r in training["reasons"]), training["reasons"]
    assert training["state"] == "up to date"
