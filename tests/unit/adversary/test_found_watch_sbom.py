"""Found by the adversary (#39): published SBOMs that ``watch`` reads wrong without saying so.

- **Two SBOM referrers** on one digest (a release re-run after the SBOM generator changed, an
  SBOM attached again by hand): ``watch`` scans the first the registry lists and ignores the
  other. Which one is first depends on the registry (the referrers API and the tag schema list
  them in opposite orders), so a vulnerable package named by the other SBOM is missed and the
  release is "up to date", exit 0. Two SBOMs that differ are an answer ``watch`` cannot give
  (7, named) or both are scanned; never one picked by the registry's order.
- **Nested components** (CycloneDX ``components[].components[]``, an assembly): only the top
  level is scanned; a vulnerable package nested inside is missed, "up to date", exit 0.
- **A large SBOM**: reading its packages is quadratic (each package is looked for in a list of
  those read before it), so 8,000 components take ~15 s and 20,000 minutes: a single large or
  hostile SBOM stalls the scheduled ``watch`` of every release after it.
- **One package named twice** (the same distribution and version, its purl once with a
  qualifier): two findings of one advisory ("2 high open"), the reason said twice, and
  ``patch`` writes the same fix twice into ``release.patch`` (and the notes). scan.py's own
  comment: "Copies of one distribution in several places (a vendored one) are one package".
- **A deeply nested SBOM** is refused as "not a CycloneDX JSON document", which it is: the
  message should say what is wrong (too deeply nested)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.referrers import attach, list_referrers, referrers_tag
from xpu_release.oci.model import Descriptor
from xpu_release.oci.registry import OCI_INDEX, Manifest, sha256_digest

from ..helpers import run
from ..release.published_kit import CPU, NS, TRAINING, World, sbom, world

CLEAN = tuple(p for p in TRAINING if p[0] != "accelerate")  # the same image, accelerate not named


def watch(w: World) -> tuple[int, dict[str, Any], str]:
    result = run(w.root, "--registries", str(w.registries), "watch", f"{CPU}:25.03", "--advisories",
                 str(w.osv), "--today", "2026-12-03", "--json")  # fmt: skip
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)["releases"][0], result.stderr


def keep_listed(w: World, repo: str, subject: str, earlier: tuple[Descriptor, ...]) -> None:
    """The referrers tag's index lists ``earlier`` again beside what is there now. (Our own
    ``attach`` replaces a stale SBOM of ours in that index, so it alone never lists two; a tool
    that appends, as ``oras attach`` does, leaves both listed, as the referrers API does.)"""
    tag = referrers_tag(subject)
    now = w.client.get_manifest(repo, tag)
    assert now is not None
    listed = json.loads(now.body)
    listed["manifests"] += [d.to_json() for d in earlier]
    body = json.dumps(listed).encode()
    w.client.put_manifest(repo, tag, Manifest(digest=sha256_digest(body), media_type=OCI_INDEX, body=body))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("referrers_api", [False, True], ids=["tag schema", "referrers API"])
@pytest.mark.parametrize("vulnerable_first", [True, False], ids=["vulnerable first", "clean first"])
def test_two_sboms_attached_to_one_release_are_never_read_as_whichever_comes_first(
    tmp_path: Any, referrers_api: bool, vulnerable_first: bool
) -> None:
    with world(tmp_path, referrers_api=referrers_api) as w:
        w.released()
        w.osv.mkdir()
        w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
        first, second = (
            (sbom(*TRAINING), sbom(*CLEAN)) if vulnerable_first else (sbom(*CLEAN), sbom(*TRAINING))
        )
        w.publish(CPU, "25.03", first, salt="two sboms")
        repo = f"{NS}/{CPU}"
        served = w.client.get_manifest(repo, "25.03")
        assert served is not None
        subject = Manifest(digest=served.digest, media_type=served.media_type, body=served.body)
        before = list_referrers(w.client, repo, served.digest).descriptors
        attach(w.client, repo, subject, [Attachment(kind="sbom", payload=second)],
               created="2025-04-01T00:00:00Z", spool=w.spool)  # fmt: skip
        if not referrers_api:  # attached by hand, as another tool does: beside the first in the index
            keep_listed(w, repo, served.digest, before)

        code, training, _ = watch(w)

    # today: "up to date", exit 0, in two of the four cases (the registry's order decides)
    assert training["state"] != "up to date", training
    assert code in (7, 15)


@pytest.mark.timeout(60)
def test_a_vulnerable_package_nested_in_another_component_is_not_missed(published: World) -> None:
    published.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    nested = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "components": [
            {
                "type": "application",
                "name": "training",
                "components": [
                    {"type": "library", "name": n, "version": v, "purl": f"pkg:pypi/{n}@{v}"}
                    for n, v in TRAINING
                ],
            }
        ],
    }
    published.publish(CPU, "25.03", json.dumps(nested).encode(), salt="nested")

    code, training, _ = watch(published)

    # today: "up to date", exit 0: the nested accelerate 1.5.2 is never scanned
    assert training["state"] != "up to date", training
    assert code in (7, 15)


@pytest.mark.timeout(120)
def test_a_large_published_sbom_is_checked_in_seconds(published: World) -> None:
    published.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    many = [
        {"type": "library", "name": f"p{i}", "version": "1.0", "purl": f"pkg:pypi/p{i}@1.0"}
        for i in range(8000)
    ]
    many += [{"type": "library", "name": n, "version": v, "purl": f"pkg:pypi/{n}@{v}"} for n, v in TRAINING]
    published.publish(
        CPU, "25.03", json.dumps({"bomFormat": "CycloneDX", "components": many}).encode(), salt="big"
    )

    started = time.monotonic()
    code, training, _ = watch(published)
    took = time.monotonic() - started

    assert (code, training["state"]) == (15, "needs a patch")
    assert took < 5.0, f"{took:.1f} s for 8,000 components (quadratic in their number)"


@pytest.mark.timeout(60)
def test_a_deeply_nested_sbom_is_named_for_what_it_is(published: World) -> None:
    deep = b'{"bomFormat": "CycloneDX", "components": [], "metadata": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    published.publish(CPU, "25.03", deep, salt="deep")

    code, training, _ = watch(published)

    assert code == 7
    message = training["unchecked"][0]["message"]
    # today: "the attached SBOM is not a CycloneDX JSON document", of a CycloneDX document
    assert "not a CycloneDX JSON document" not in message, message
    assert "deep" in message or "nest" in message, message


@pytest.mark.timeout(60)
def test_one_package_named_twice_is_one_finding_and_one_fix(published: World) -> None:
    published.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    listed = [{"type": "library", "name": n, "version": v, "purl": f"pkg:pypi/{n}@{v}"} for n, v in TRAINING]
    # the same distribution again, its purl with a qualifier (a vendored copy as another tool names it)
    listed.append({"type": "library", "name": "accelerate", "version": "1.5.2",
                   "purl": "pkg:pypi/accelerate@1.5.2?vendored=yes"})  # fmt: skip
    published.publish(
        CPU, "25.03", json.dumps({"bomFormat": "CycloneDX", "components": listed}).encode(), salt="2x"
    )

    code, training, _ = watch(published)

    assert code == 15
    # today: "2 high open" and the reason twice (and patch writes the fix twice in release.patch)
    assert training["open"]["high"] == 1, training["open"]
    assert len(training["reasons"]) == 1, [r["text"] for r in training["reasons"]]
