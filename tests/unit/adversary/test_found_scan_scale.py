"""Many advisories for one package. ``evidence.scan.scan`` collects each group's fixed versions
by walking every hit of the package and asking ``any(r is g for g in group)`` (scan.py, the
``fixed`` set), and ``_groups`` intersects each record's ids with every group so far: both O(n²)
in the advisories that affect one package. 8,000 take 21 s, 16,000 about 90 s; a 2 MB archive of
50,000 tiny records naming one package of the image holds a scan (and the release gate) for
some 15 minutes. Real exports come near: Debian's ``linux`` source has thousands of records.
outside-data.md bounds an archive's members at 1,000,000; never a hang."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from ..cli.hostile import REF
from .proc import a_users_error_of, run_cli


def test_10000_advisories_for_one_package_are_scanned_in_seconds(repo: Path, tmp_path: Path) -> None:
    archive = tmp_path / "all.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(10_000):
            events = [{"introduced": "0"}, {"fixed": f"2.{i}"}]
            affected = {"package": {"ecosystem": "PyPI", "name": "demo"},
                        "ranges": [{"type": "ECOSYSTEM", "events": events}]}  # fmt: skip
            record = {"id": f"TEST-{i}", "affected": [affected]}
            z.writestr(f"TEST-{i}.json", json.dumps(record))

    ran = run_cli(repo, ["scan", REF, "--advisories", str(archive)], deadline=20, no_engine=True)

    a_users_error_of(ran, 14)  # today: still running at 20 s (some 35 s in all)
