"""The record's ``scan`` of a platformed release (issue 43), merged from each platform's gate:
every finding once, failed if any platform's failed, skipped only if every one was; one
platform's entry is kept as it is."""

from __future__ import annotations

from typing import Any

import pytest

from xpu_release.evidence.scan import merged_entry


def entry(status: str, *found: tuple[str, str, str]) -> dict[str, Any]:
    findings = [{"id": i, "package": p, "installed": v, "severity": "low"} for i, p, v in found]
    return {"status": status, "reason": "threshold high; 3 advisories", "findings": findings}


@pytest.mark.parametrize(
    ("statuses", "merged"),
    [
        (("passed", "passed"), "passed"),
        (("passed", "failed"), "failed"),
        (("skipped", "passed"), "passed"),
        (("skipped", "skipped"), "skipped"),
    ],
)
def test_the_status_is_the_worst_and_skipped_only_when_every_platform_skipped(
    statuses: tuple[str, str], merged: str
) -> None:
    assert merged_entry([entry(s) for s in statuses])["status"] == merged


def test_every_finding_once_in_the_order_met() -> None:
    amd64 = entry("passed", ("CVE-1", "bash", "5.2"), ("CVE-2", "zlib", "1:1.2"))
    arm64 = entry("passed", ("CVE-2", "zlib", "1:1.2"), ("CVE-3", "libffi", "3.4"), ("CVE-1", "bash", "5.1"))

    found = merged_entry([amd64, arm64])["findings"]

    assert [(f["id"], f["installed"]) for f in found] == [
        ("CVE-1", "5.2"),
        ("CVE-2", "1:1.2"),
        ("CVE-3", "3.4"),
        ("CVE-1", "5.1"),
    ]


def test_one_platform_entry_is_kept_as_it_is() -> None:
    only = entry("failed", ("CVE-1", "bash", "5.2"))

    assert merged_entry([only]) is only
