"""A release line steered on the real stack (issue 40): the fixture image released to a staging
channel and promoted by digest, with every referrer, to production; a patch withdrawn (``latest``
back on the release before it everywhere, the patch still pullable by tag and digest) and
reinstated; a withdraw killed halfway converges when run again; a release past its support date
says end of life, carries its lifecycle document at every endpoint, and a mirror carries it too.

Production and staging are two namespaces at the stack's four endpoints (the public registry,
TLS and a password, and three VPC regions); what each serves is read with our own client and,
for the referrers, with skopeo, as an outside user reads them."""

from __future__ import annotations

import json
import shutil
import signal
import time
import uuid
from datetime import date, timedelta
from pathlib import Path

import pytest

from .conftest import Cli
from .faultproxy import FaultProxy
from .test_attestations import ENDPOINTS, _keypair, referrers_index
from .test_publish import REF, REGIONS, proxy, publish, registries_file, served, skopeo_digest  # noqa: F401

pytestmark = pytest.mark.integration

PATCH = "xpu-fixture:1.0.1"
LIFECYCLE_TYPE = "application/vnd.microsoft.artifact.lifecycle"
END_OF_LIFE = "vnd.microsoft.artifact.lifecycle.end-of-life.date"


def referrer_digests(namespace: str, digest: str) -> dict[str, list[str]]:
    """The referrers of ``digest`` at every endpoint, as skopeo reads the tag schema's index."""
    return {host: sorted(e["digest"] for e in referrers_index(host, f"{namespace}/xpu-fixture", digest))
            for host in ENDPOINTS}  # fmt: skip


def steer(cli: Cli, regs: Path, *args: str) -> dict[str, object]:
    result = cli.run("--registries", str(regs), *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_release_promoted_from_staging_then_a_patch_withdrawn_and_reinstated(
    tested: Cli,
    tmp_path: Path,
    proxy: FaultProxy,  # noqa: F811
) -> None:
    staging_ns, production_ns = "s" + uuid.uuid4().hex[:10], "p" + uuid.uuid4().hex[:10]
    staging = registries_file(tmp_path / "staging.yaml", staging_ns)
    production = registries_file(tmp_path / "production.yaml", production_ns)
    record = staging.with_suffix(".record.json")
    private, public, _ = _keypair(tmp_path / "key")

    # Released to staging, signed; production serves nothing of it.
    assert publish(tested, staging, "--signing-key", str(private)).returncode == 0
    digest = json.loads(record.read_text())["digest"]
    assert set(served(tested, production, "1.0").values()) == {None}

    promoted = tested.run("--registries", str(production), "promote", REF, "--from", str(staging),
                          "--record", str(record), "--json")  # fmt: skip
    again = tested.run("--registries", str(production), "promote", REF, "--from", str(staging),
                       "--record", str(record), "--json")  # fmt: skip
    deep = tested.run("--registries", str(production), "verify", REF, "--deep", "--record", str(record))
    keyed = tested.run("--registries", str(production), "verify", REF, "--key", str(public),
                       "--record", str(record))  # fmt: skip

    assert promoted.returncode == 0, promoted.stderr
    assert set(served(tested, production, "1.0").values()) == {digest}  # one digest everywhere
    assert set(served(tested, production, "latest").values()) == {digest}
    staged = referrer_digests(staging_ns, digest)
    assert referrer_digests(production_ns, digest) == staged  # every referrer, by digest
    assert set(map(tuple, staged.values())) == {
        tuple(sorted(json.loads(record.read_text())["attachments"].values()))
    }
    assert again.returncode == 0, again.stderr
    assert all(c["blobs_copied"] == 0 for c in json.loads(again.stdout)["copies"])  # resumable
    assert deep.returncode == 0, deep.stdout + deep.stderr
    assert keyed.returncode == 0, keyed.stdout + keyed.stderr
    kept = json.loads(record.read_text())
    assert [p["channel"] for p in kept["promotions"]] == [str(production)]

    # A patch released to production, then withdrawn: latest back on 1.0 everywhere.
    manifest = tested.root / "manifests" / "xpu-fixture" / "1.0.1.yaml"
    try:
        bump = tested.run("new-version", PATCH, "--from", "1.0", "--set", "six=1.17.0")
        assert bump.returncode == 0, bump.stderr
        tested.run("lock", PATCH, check=True)
        released = tested.run("--registries", str(production), "release", PATCH, "--json", timeout=1800)
        assert released.returncode == 0, released.stderr
        patch = json.loads(released.stdout)["record"]["digest"]
        assert set(served(tested, production, "latest").values()) == {patch}

        withdrawn = steer(tested, production, "withdraw", PATCH, "--reason", "six 1.17.0 breaks the fixture")
        status = tested.run("--registries", str(production), "status", PATCH)
        status_json = steer(tested, production, "status", PATCH)

        assert withdrawn["ok"] is True
        assert set(served(tested, production, "latest").values()) == {digest}
        assert set(served(tested, production, "1.0.1").values()) == {patch}  # pinned users are not broken
        for host in ENDPOINTS:  # still pullable by tag and by digest
            assert skopeo_digest(f"{host}/{production_ns}/xpu-fixture:1.0.1") == patch
            assert skopeo_digest(f"{host}/{production_ns}/xpu-fixture@{patch}") == patch
        assert "withdrawn" in status.stdout
        assert "six 1.17.0 breaks the fixture" in status.stdout
        rows = [r for r in status_json["endpoints"] if r["tag"] == "1.0.1"]  # type: ignore[attr-defined]
        assert [r["withdrawn"]["reason"] for r in rows] == ["six 1.17.0 breaks the fixture"] * 4

        reinstated = steer(tested, production, "reinstate", PATCH)
        assert reinstated["ok"] is True
        assert set(served(tested, production, "latest").values()) == {patch}

        # Killed while it attaches the notice at a slow region: a rerun converges.
        slow = registries_file(tmp_path / "slow.yaml", production_ns, {**REGIONS, "cn-shanghai": proxy.host})
        proxy.faults.delay = 0.5
        proc = tested.popen("--registries", str(slow), "withdraw", PATCH, "--reason", "killed halfway")
        deadline = time.monotonic() + 120
        while not any(s.startswith("PUT") for s in proxy.faults.seen) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        proxy.faults.delay = 0.0
        rerun = steer(tested, slow, "withdraw", PATCH, "--reason", "killed halfway")

        assert rerun["ok"] is True
        assert set(served(tested, production, "latest").values()) == {digest}
        notices = {host: [e["digest"] for e in referrers_index(host, f"{production_ns}/xpu-fixture", patch)
                          if e["artifactType"] == "application/vnd.xpu-release.withdrawal.v1+json"]
                   for host in ENDPOINTS}  # fmt: skip
        assert len({tuple(sorted(n)) for n in notices.values()}) == 1  # the same notices everywhere
    finally:
        manifest.unlink(missing_ok=True)
        shutil.rmtree(tested.root / "images" / "xpu-fixture" / "1.0.1", ignore_errors=True)


def test_a_release_past_its_support_date_says_end_of_life_and_carries_the_date(
    tested: Cli, tmp_path: Path
) -> None:
    namespace = "l" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    manifest = tested.root / "manifests" / "xpu-fixture" / "1.0.yaml"
    original = manifest.read_text()
    past = date.today() - timedelta(days=30)
    assert publish(tested, regs).returncode == 0
    digest = json.loads(regs.with_suffix(".record.json").read_text())["digest"]
    try:
        manifest.write_text(original + f"support:\n  until: {past.isoformat()}\n")
        again = publish(tested, regs, "--json")  # the date is set: a rerun attaches it
        status = tested.run(
            "--registries", str(regs), "status", REF, "--record", str(regs.with_suffix(".record.json"))
        )
        status_json = json.loads(tested.run("--registries", str(regs), "status", REF, "--json").stdout)
        listed = tested.run("list")
        mirrored = tested.run(
            "--registries", str(regs), "mirror", REF, "--to", f"oci:{tmp_path / 'usb'}", "--json"
        )
    finally:
        manifest.write_text(original)

    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["digest"] == digest  # not rebuilt, not another image
    assert set(served(tested, regs, "1.0").values()) == {digest}
    assert set(served(tested, regs, "latest").values()) == {digest}
    for host in ENDPOINTS:  # the lifecycle document, as .NET's, read by an outside client
        (entry,) = [e for e in referrers_index(host, f"{namespace}/xpu-fixture", digest)
                    if e["artifactType"] == LIFECYCLE_TYPE]  # fmt: skip
        assert entry["annotations"][END_OF_LIFE] == f"{past.isoformat()}T00:00:00Z"
    assert status.returncode == 0, status.stderr
    assert f"end of life since {past.isoformat()}" in status.stdout
    assert status_json["support"]["state"] == "end-of-life"
    assert f"xpu-fixture:1.0  end of life since {past.isoformat()}" in listed.stdout
    assert mirrored.returncode == 0, mirrored.stderr
    assert "lifecycle" in json.loads(mirrored.stdout)["kinds"]


def test_release_of_a_patch_after_a_withdrawal_moves_latest_as_publish_and_promote_do(
    tested: Cli, tmp_path: Path
) -> None:
    """1.0 and 1.1 released, 1.1 withdrawn (``latest`` back on 1.0): ``release`` of the patch
    1.0.1 is then the newest release not withdrawn and takes ``latest``, as ``publish`` and
    ``promote`` of it do (the line rule, release/model/line.py; issue 49)."""
    regs = registries_file(tmp_path / "line.yaml", "l" + uuid.uuid4().hex[:10])
    made = [tested.root / "manifests" / "xpu-fixture" / f"{v}.yaml" for v in ("1.1", "1.0.1")]
    try:
        assert publish(tested, regs).returncode == 0
        first = tested.run("new-version", "xpu-fixture:1.1", "--from", "1.0", "--set", "six=1.17.0")
        assert first.returncode == 0, first.stderr
        tested.run("lock", "xpu-fixture:1.1", check=True)
        assert (
            tested.run("--registries", str(regs), "release", "xpu-fixture:1.1", timeout=1800).returncode == 0
        )
        assert steer(tested, regs, "withdraw", "xpu-fixture:1.1", "--reason", "bad")["ok"] is True
        one = set(served(tested, regs, "1.0").values())
        assert set(served(tested, regs, "latest").values()) == one

        bump = tested.run("new-version", PATCH, "--from", "1.0", "--set", "six=1.17.0")
        assert bump.returncode == 0, bump.stderr
        tested.run("lock", PATCH, check=True)
        released = tested.run("--registries", str(regs), "release", PATCH, "--json", timeout=1800)

        assert released.returncode == 0, released.stderr
        record = json.loads(released.stdout)["record"]
        moved = record["floating_moved"]  # a ref a tag and endpoint: host/namespace/xpu-fixture:TAG
        # latest, and its own line's tag (made by new-version, 1.0.1 is a line of its own)
        assert {r.rpartition(":")[2] for r in moved} == {"latest", "1.0.1-latest"}
        assert len(moved) == 2 * len(served(tested, regs, "1.0"))
        assert set(served(tested, regs, "latest").values()) == {record["digest"]}
    finally:
        for manifest in made:
            manifest.unlink(missing_ok=True)
            shutil.rmtree(tested.root / "images" / "xpu-fixture" / manifest.stem, ignore_errors=True)
