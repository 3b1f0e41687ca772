"""``watch`` never says "up to date" on input it could not read (issue 53, class 4): a security
watch that fails open keeps a scheduled job green while a vulnerable package ships. Found by an
attack pass: an SBOM naming the vulnerable package without a usable package URL, and an OSV record
about it with a field of the wrong type, were read as "nothing to match" (exit 0)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ..helpers import run
from ..release.published_kit import CPU, TRAINING, Calendar, World, sbom

ACCELERATE = {
    "type": "library",
    "name": "accelerate",
    "version": "1.5.2",
    "purl": "pkg:pypi/accelerate@1.5.2",
}


def watched(w: World) -> tuple[int, dict[str, Any], str]:
    result = run(w.root, "--registries", str(w.registries), "watch", f"{CPU}:25.03",
                 "--advisories", str(w.osv), "--today", "2026-12-03", "--json")  # fmt: skip
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)["releases"][0], result.stderr


@pytest.fixture
def w(published: World, calendar: Calendar) -> World:
    published.calendar = calendar
    return published


def with_accelerate_as(w: World, component: dict[str, Any]) -> None:
    """25.03 published again, its SBOM naming accelerate as ``component`` (the rest as before)."""
    others = json.loads(sbom(*(p for p in TRAINING if p[0] != "accelerate")))
    others["components"].append(component)
    w.publish(CPU, "25.03", json.dumps(others).encode(), salt="again")


SBOM_CASES: dict[str, dict[str, Any]] = {
    # found by a second adversary: a deb purl of no release, a version no ecosystem orders, a
    # purl naming another package, a version that is not text
    "a version PyPI cannot order": {
        **ACCELERATE,
        "version": "1.5.2-custom",
        "purl": "pkg:pypi/accelerate@1.5.2-custom",
    },
    "a package URL naming another package": {**ACCELERATE, "purl": "pkg:pypi/accelerate-x@1.5.2"},
    "a version that is not text": {**ACCELERATE, "version": 1.52},
    "no package URL": {k: v for k, v in ACCELERATE.items() if k != "purl"},
    "an empty package URL": {**ACCELERATE, "purl": ""},
    "a package URL without a version": {**ACCELERATE, "purl": "pkg:pypi/accelerate"},
    "a package URL that disagrees with the version": {**ACCELERATE, "purl": "pkg:pypi/accelerate@9.9.9"},
}


@pytest.mark.parametrize("case", list(SBOM_CASES))
def test_an_sbom_naming_the_vulnerable_package_unreadably_is_could_not_check(w: World, case: str) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    with_accelerate_as(w, SBOM_CASES[case])

    code, release, err = watched(w)

    assert code == 7, err
    assert release["state"] == "could not check"
    assert "accelerate" in err


DEB_CASES = {
    "no distro": "pkg:deb/debian/openssl@3.0.11-1?arch=amd64",
    "a distro of no release": "pkg:deb/debian/openssl@3.0.11-1?arch=amd64&distro=bookworm",
    "another namespace": "pkg:deb/Debian/openssl@3.0.11-1?arch=amd64&distro=debian-12",
}


@pytest.mark.parametrize("case", list(DEB_CASES))
def test_a_debian_package_of_no_known_release_is_could_not_check(w: World, case: str) -> None:
    w.advisory("DSA-0001", "openssl", "3.0.12-1", eco="Debian:12")
    with_accelerate_as(
        w, {"type": "library", "name": "openssl", "version": "3.0.11-1", "purl": DEB_CASES[case]}
    )

    code, release, err = watched(w)

    assert code == 7, err
    assert release["state"] == "could not check"


def test_an_sbom_that_lists_no_package_is_could_not_check(w: World) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    w.publish(
        CPU, "25.03", b'{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": []}', salt="again"
    )

    code, release, err = watched(w)

    assert code == 7, err
    assert release["state"] == "could not check"


def test_advisories_that_were_not_read_are_could_not_check(w: World) -> None:
    w.advisory("CVE-2026-0100", "ray", "2.0.0", introduced="1.0")
    (w.osv / "dangling.json").symlink_to(w.osv / "nowhere.json")
    (w.osv / "next.json").write_text(json.dumps({"schema_version": "2.0.0", "id": "X-2", "affected": []}))

    code, release, err = watched(w)

    assert code == 7, err
    assert release["state"] == "could not check"
    assert "1 of another schema, 1 not regular files" in err


def test_a_record_about_another_package_whose_ranges_cannot_be_read_blocks_nothing(w: World) -> None:
    # Which package it is about can be read: only a release holding that package is unchecked.
    broken = record_with(_set(("affected", 0, "ranges"), {"type": "ECOSYSTEM"}))
    broken["affected"][0]["package"]["name"] = "left-pad"
    (w.osv / "CVE-2026-0002.json").write_text(json.dumps(broken))

    code, release, err = watched(w)

    assert code == 0, err
    assert release["state"] == "up to date"


def record_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "schema_version": "1.6.0", "id": "CVE-2026-0002", "summary": "in accelerate",
        "affected": [{"package": {"ecosystem": "PyPI", "name": "accelerate"},
                      "ranges": [{"type": "ECOSYSTEM",
                                  "events": [{"introduced": "0"}, {"fixed": "1.6.0"}]}]}],
    }  # fmt: skip
    change(record)
    return record


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        here: Any = record
        for part in path[:-1]:
            here = here[part]
        here[path[-1]] = value

    return change


OSV_CASES: dict[str, Callable[[dict[str, Any]], None]] = {
    "ranges a mapping": _set(("affected", 0, "ranges"), {"type": "ECOSYSTEM"}),
    "events a string": _set(("affected", 0, "ranges", 0, "events"), "introduced 0"),
    "affected a string": _set(("affected",), "accelerate"),
    "affected null": _set(("affected",), None),
    "package a list": _set(("affected", 0, "package"), ["PyPI", "accelerate"]),
    "an introduced that does not parse": _set(
        ("affected", 0, "ranges", 0, "events", 0), {"introduced": "1.x!"}
    ),
}


@pytest.mark.parametrize("case", list(OSV_CASES))
def test_an_advisory_about_a_package_that_cannot_be_read_is_could_not_check(w: World, case: str) -> None:
    w.advisory("CVE-2026-0100", "ray", "2.0.0", introduced="1.0")  # a readable one beside it
    (w.osv / "CVE-2026-0002.json").write_text(json.dumps(record_with(OSV_CASES[case])))

    code, release, err = watched(w)

    assert code == 7, err
    assert release["state"] == "could not check"


def test_a_folder_whose_every_record_is_unreadable_is_could_not_check(w: World) -> None:
    for n in range(3):
        (w.osv / f"broken-{n}.json").write_text("{not json")

    code, release, err = watched(w)

    assert code == 7, err
    assert release["state"] == "could not check"
    assert "3 advisory record(s)" in err
