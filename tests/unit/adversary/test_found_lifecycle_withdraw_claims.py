"""``withdraw`` must not say a release is withdrawn when no registry holds its notice.

The digest ``withdraw`` acts on is the release record's when there is a record. When the record
names a digest the endpoints do not hold (a local build that was never pushed, a record of an
earlier attempt), every endpoint was "absent": nothing was attached, no tag moved, ``latest``
still served the bad release everywhere; yet the command exited 0, printed "withdrawn … by …:
reason", and wrote ``withdrawn`` into the record (so ``list`` and the next notes say it too).

A withdraw that attached its notice nowhere has not withdrawn anything: it must not exit 0 and
must not record a withdrawal."""

from __future__ import annotations

import json
from pathlib import Path

from xpu_release.evidence.lifecycle import in_force, notices_at
from xpu_release.release.model.record import read

from ..helpers import run
from ..release.line import channel, manifests, publish, recorded
from .lifecycle_kit import at

VERSIONS = ["1.0", "1.1", "1.2"]
NEVER_PUSHED = "sha256:" + "ab" * 32


def test_a_withdraw_that_attaches_its_notice_nowhere_neither_succeeds_nor_records_a_withdrawal(
    repo: Path, tmp_path: Path
) -> None:
    manifests(repo, VERSIONS)
    with channel(repo, tmp_path, "production") as ch:
        digests = publish(ch, VERSIONS, tmp_path / "spool").digests
        path = recorded(ch, "1.2", NEVER_PUSHED)  # the record's digest is served nowhere

        result = at(ch, "withdraw", "demo:1.2", "--reason", "it crashes on start", "--json")
        code, out = result.exit_code, result.stdout

        served_latest = set(ch.served("latest").values())
        noticed = [in_force(notices_at(ch.client(ep), ch.repo(ep), digests["1.2"])) for ep in ch.endpoints()]
        listed = run(ch.root, "list").stdout
        report = json.loads(out) if out else {}

    assert served_latest == {digests["1.2"]}  # what users pull is still the bad release...
    assert not any(noticed)  # ...and no registry says it is withdrawn
    assert code != 0, "withdraw exited 0 although it withdrew nothing anywhere"
    assert read(path).withdrawn is None, "the record says withdrawn although no registry holds a notice"
    assert "demo:1.2  withdrawn" not in listed
    assert report.get("ok") is not True
