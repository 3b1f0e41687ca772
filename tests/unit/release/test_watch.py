"""``watch``: every published release, read as its users pull it (the version tag, the SBOM
attached to that digest), re-scanned against today's advisories, its base checked, each open
finding's fix and SLA named; exit 0 when nothing is due, 15 when something is. No engine: an
in-process registry serves the releases of a copy of this repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..helpers import run
from .published_kit import CPU, SDK, TRAINING, Calendar, World, sbom, world

TODAY = "2026-12-03"


@pytest.fixture
def w(published: World, calendar: Calendar) -> World:
    published.calendar = calendar
    return published


def watch(w: World, *args: str, today: str = TODAY) -> tuple[int, dict[str, Any]]:
    """``watch --json`` run on the day ``today`` (not a what-if: it adds to the history)."""
    if w.calendar is not None:
        w.calendar.set(today)
    result = run(
        w.root,
        "--registries",
        str(w.registries),
        "watch",
        "--advisories",
        str(w.osv),
        "--today",
        today,
        "--json",
        *args,
    )
    assert "Traceback" not in result.output
    return result.exit_code, {r["ref"]: r for r in json.loads(result.stdout)["releases"]}


def test_with_nothing_new_every_published_release_is_up_to_date_and_watch_exits_0(w: World) -> None:
    w.advisory("CVE-2026-0100", "accelerate", "1.5.0", introduced="1.0")  # fixed before 1.5.2

    code, found = watch(w)

    assert code == 0
    assert found[f"{CPU}:25.03"]["state"] == "up to date"
    assert found[f"{SDK}:2.13.0"]["state"] == "up to date"
    assert found["training-xpu-pytorch:25.03"]["state"] == "not published"  # reported, not an error
    assert found[f"{CPU}:25.03"]["digest"] == w.client.head_manifest(f"egslingjun/{CPU}", "25.03")


def test_a_new_advisory_in_a_published_sbom_names_the_fix_and_the_sla(w: World) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0", aliases=("GHSA-aaaa-bbbb-cccc",))

    code, found = watch(w)

    assert code == 15
    training = found[f"{CPU}:25.03"]
    assert training["state"] == "needs a patch"
    assert [(r["kind"], r["id"], r["package"], r["installed"], r["fix"]) for r in training["reasons"]] == [
        ("advisory", "CVE-2026-0001", "accelerate", "1.5.2", "1.6.0")
    ]
    finding = training["findings"][0]
    assert finding["aliases"] == ["GHSA-aaaa-bbbb-cccc"]
    assert finding["sla"] == {
        "since": "2026-11-20",
        "source": "published",
        "age_days": 13,
        "days": 28,
        "due": "2026-12-18",
        "state": "within",
    }
    assert training["open"]["high"] == 1
    assert found[f"{SDK}:2.13.0"]["state"] == "up to date"  # the others are still answered for


def test_the_text_answer_says_the_same_in_one_line_per_reason(w: World) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")

    result = run(
        w.root,
        "--registries",
        str(w.registries),
        "watch",
        f"{CPU}:25.03",
        "--advisories",
        str(w.osv),
        "--today",
        "2027-01-10",
    )

    assert result.exit_code == 15
    assert f"{CPU}:25.03  needs a patch (out of SLA)" in result.stdout
    assert "CVE-2026-0001 (high) in accelerate 1.5.2: fixed in 1.6.0" in result.stdout
    assert "due 2026-12-18, out" in result.stdout
    assert "watched 1 releases against 1 advisories: 1 needs a patch" in result.stderr


def test_an_open_finding_past_its_sla_with_no_fix_is_out_of_sla(w: World) -> None:
    w.advisory("CVE-2026-0002", "ray", None, severity="MODERATE", published="2026-01-02T00:00:00Z")

    code, found = watch(w)

    assert code == 15
    training = found[f"{CPU}:25.03"]
    assert training["state"] == "out of SLA"
    assert training["reasons"] == []
    assert training["findings"][0]["fix"] is None
    assert training["findings"][0]["sla"]["due"] == "2026-07-01"  # medium: 180 days


def test_a_finding_below_every_sla_and_the_gate_is_reported_not_due(w: World) -> None:
    w.advisory("CVE-2026-0003", "idna", "3.21", severity="LOW")

    code, found = watch(w)

    assert code == 0
    training = found[f"{CPU}:25.03"]
    assert training["state"] == "up to date"
    assert training["findings"][0]["fix"] == "3.21"
    assert training["findings"][0]["sla"]["state"] == "none"


def test_a_finding_the_images_vex_excepts_is_not_open(w: World) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    (w.root / "images" / CPU / "vex.openvex.json").write_text(
        json.dumps(
            {
                "@context": "https://openvex.dev/ns/v0.2.0",
                "@id": "https://example.invalid/vex/1",
                "author": "t",
                "timestamp": "2026-11-01T00:00:00Z",
                "version": 1,
                "statements": [
                    {
                        "vulnerability": {"name": "CVE-2026-0001"},
                        "products": [{"@id": f"pkg:oci/{CPU}"}],
                        "status": "not_affected",
                        "justification": "vulnerable_code_not_in_execute_path",
                        "review_by": "2027-06-01",
                    }
                ],
            }
        )
    )

    code, found = watch(w)

    assert code == 0
    assert found[f"{CPU}:25.03"]["findings"] == []
    assert found[f"{CPU}:25.03"]["excepted"] == 1


def test_a_moved_base_tag_needs_a_patch_and_the_child_needs_one_through_it(w: World) -> None:
    pinned = w.client.head_manifest("base/debian/bookworm-python-cxx", "12")
    moved = w.serve_base(salt="rebuilt")

    code, found = watch(w)

    assert code == 15
    sdk = found[f"{SDK}:2.13.0"]
    assert sdk["state"] == "needs a patch"
    assert [(r["kind"], r["base"], r["old"], r["new"]) for r in sdk["reasons"]] == [
        ("base-moved", "debian/bookworm-python-cxx:12", pinned, moved)
    ]
    training = found[f"{CPU}:25.03"]
    assert training["state"] == "needs a patch"
    assert [(r["kind"], r["moves_to"]) for r in training["reasons"]] == [("through-base", f"{SDK}:2.13.0")]
    assert plan(w) == [f"{SDK}:2.13.0", f"{CPU}:25.03"]  # parents first


def plan(w: World, *refs: str) -> list[str]:
    result = run(
        w.root, "--registries", str(w.registries), "watch", *refs, "--advisories", str(w.osv), "--json"
    )
    return list(json.loads(result.stdout)["plan"])


def test_the_plan_of_a_child_named_alone_patches_its_base_first(w: World) -> None:
    w.serve_base(salt="rebuilt")

    result = run(
        w.root, "--registries", str(w.registries), "watch", f"{CPU}:25.03", "--advisories", str(w.osv)
    )

    assert plan(w, f"{CPU}:25.03") == [f"{SDK}:2.13.0", f"{CPU}:25.03"]
    assert (
        f"to patch and release, parents first (watch --release): {SDK}:2.13.0, {CPU}:25.03" in result.stdout
    )


def sdk_patch(w: World, version: str = "2.13.0.1", *, publish: bool = True) -> str | None:
    """A patch of the SDK with a manifest and a lock (its base pin as 2.13.0's), published."""
    w.patch_manifest(SDK, version, "2.13.0")
    return w.publish(SDK, version, sbom(("torch", "2.13.0+cpu")), salt=version) if publish else None


def test_a_published_patch_of_the_base_release_asks_the_child_to_move_to_it(w: World) -> None:
    digest = sdk_patch(w)

    code, found = watch(w)

    assert code == 15
    assert found[f"{SDK}:2.13.0"]["state"] == "superseded"
    assert found[f"{SDK}:2.13.0"]["superseded_by"] == f"{SDK}:2.13.0.1"
    assert found[f"{SDK}:2.13.0.1"]["state"] == "up to date"
    training = found[f"{CPU}:25.03"]
    assert training["state"] == "needs a patch"
    assert [(r["kind"], r["moves_to"], r["new"]) for r in training["reasons"]] == [
        ("base-patched", f"{SDK}:2.13.0.1", digest)
    ]


def test_a_base_patch_prepared_but_not_published_moves_nothing_yet(w: World) -> None:
    sdk_patch(w, publish=False)

    code, found = watch(w)

    assert code == 0
    assert found[f"{SDK}:2.13.0"]["state"] == "up to date"
    assert found[f"{SDK}:2.13.0"]["pending"] == f"{SDK}:2.13.0.1"
    assert found[f"{SDK}:2.13.0.1"]["state"] == "not published"
    assert found[f"{CPU}:25.03"]["state"] == "up to date"


def test_a_release_whose_patch_is_published_is_superseded_and_left_to_it(w: World) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    w.patch_manifest(CPU, "25.03.1", "25.03", "components:\n  accelerate: {version: 1.6.0}\n")
    fixed = tuple((n, "1.6.0" if n == "accelerate" else v) for n, v in TRAINING)
    w.publish(CPU, "25.03.1", sbom(*fixed), salt="patched")

    code, found = watch(w)

    assert code == 0
    assert found[f"{CPU}:25.03"]["state"] == "superseded"
    assert found[f"{CPU}:25.03"]["superseded_by"] == f"{CPU}:25.03.1"
    assert found[f"{CPU}:25.03"]["uncommitted"] is False  # its manifest is here: it is watched
    assert found[f"{CPU}:25.03.1"]["state"] == "up to date"


def test_a_patch_published_by_a_scheduled_job_supersedes_before_its_files_are_committed(w: World) -> None:
    """A scheduled runner's checkout has no manifest of the patch the last scheduled run released
    (its files are in that job's artifacts until someone commits them): the registry's tags
    say it is there, so the release is superseded, not patched again, and the answer says
    what to commit. Until then the release the line's users pull is watched by no one: that
    needs a person (exit 15, as ``needs a patch``), never a green run (the artifacts expire)."""
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    fixed = tuple((n, "1.6.0" if n == "accelerate" else v) for n, v in TRAINING)
    w.publish(CPU, "25.03.1", sbom(*fixed), salt="patched")  # no manifests/…/25.03.1.yaml here

    code, found = watch(w)
    text = run(w.root, "--registries", str(w.registries), "watch", f"{CPU}:25.03", "--advisories",
               str(w.osv), "--today", TODAY)  # fmt: skip

    assert code == 15, found
    assert found[f"{CPU}:25.03"]["state"] == "superseded"
    assert found[f"{CPU}:25.03"]["superseded_by"] == f"{CPU}:25.03.1"
    assert found[f"{CPU}:25.03"]["uncommitted"] is True
    assert text.exit_code == 15, text.output
    assert f"{CPU}:25.03.1 is published but its manifest is not in this checkout" in text.stdout
    assert "1 superseded by a patch not committed here" in text.stderr
    assert not (w.root / "manifests" / CPU / "25.03.1.yaml").exists()


def test_a_tag_pushed_by_hand_that_looks_like_a_patch_hides_no_finding_behind_a_green_run(w: World) -> None:
    """Anyone who can push a tag named like the next patch (a copy of the release itself, here)
    makes the release superseded; the run still asks a person to look (exit 15), and the plan
    patches nothing."""
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    w.client.put_manifest(f"egslingjun/{CPU}", "25.03.1", w.client.get_manifest(f"egslingjun/{CPU}", "25.03"))

    result = run(w.root, "--registries", str(w.registries), "watch", "--advisories", str(w.osv),
                 "--today", TODAY, "--json")  # fmt: skip

    answer = json.loads(result.stdout)
    assert result.exit_code == answer["exit_code"] == 15, result.output
    assert answer["plan"] == []


def test_a_committed_release_of_a_line_of_its_own_named_like_a_patch_supersedes_nothing(w: World) -> None:
    """25.03.1 released as a version of its own (no release.patch: a line of its own) is in
    the checkout and among the tags: it is not a patch of 25.03, which is watched as before."""
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    w.patch_manifest(CPU, "25.03.1", "25.03")
    path = w.root / "manifests" / CPU / "25.03.1.yaml"
    path.write_text(path.read_text().split("release:")[0])  # not a patch
    w.publish(CPU, "25.03.1", sbom(*TRAINING), salt="its own")

    code, found = watch(w)

    assert code == 15, found
    assert found[f"{CPU}:25.03"]["state"] == "needs a patch"
    assert found[f"{CPU}:25.03"]["superseded_by"] is None
    assert found[f"{CPU}:25.03"]["uncommitted"] is False
    assert found[f"{CPU}:25.03.1"]["state"] == "needs a patch"


def test_the_referrers_api_finds_the_sbom_as_the_tag_schema_does(tmp_path: Path) -> None:
    with world(tmp_path, referrers_api=True) as made:
        made.released()
        made.advisory("CVE-2026-0001", "accelerate", "1.6.0")

        code, found = watch(made)

    assert code == 15
    assert found[f"{CPU}:25.03"]["reasons"][0]["id"] == "CVE-2026-0001"


def history(w: World, image: str, version: str) -> list[Path]:
    return sorted((w.root / "out" / "releases" / image / f"{version}.watch").glob("*.json"))


def test_each_answer_is_added_to_the_history_and_none_is_ever_rewritten(w: World) -> None:
    w.advisory("CVE-2026-0002", "ray", None, severity="MODERATE", published=None)  # no date: first seen
    record = w.root / "out" / "releases" / CPU / "25.03.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")  # a release record is never touched (here: even one that is damaged)

    watch(w, today="2026-12-03")
    first = {p.name: p.read_bytes() for p in history(w, CPU, "25.03")}
    code, found = watch(w, today="2027-01-10")

    assert code == 0
    entries = history(w, CPU, "25.03")
    assert len(entries) == 2
    assert {p.name: p.read_bytes() for p in entries if p.name in first} == first
    assert record.read_text() == "{}"
    latest = json.loads(entries[-1].read_text())
    assert latest["state"] == found[f"{CPU}:25.03"]["state"] == "up to date"
    finding = found[f"{CPU}:25.03"]["findings"][0]
    assert finding["first_seen"] == "2026-12-03"  # carried forward from the first re-scan
    assert finding["sla"]["source"] == "first-seen"
    assert finding["sla"]["since"] == "2026-12-03"
    assert finding["sla"]["age_days"] == 38


def test_the_local_release_record_says_when_its_findings_were_first_seen(w: World) -> None:
    w.advisory("CVE-2026-0002", "ray", None, severity="MODERATE", published=None)
    record = {
        "ref": f"{CPU}:25.03",
        "manifest": "m",
        "manifest_sha256": "m",
        "inputs_sha256": "i",
        "tested_image_id": "sha256:" + "c" * 64,
        "digest": None,
        "published_at": "2026-04-01T10:00:00Z",
        "complete": True,
        "floating_moved": [],
        "endpoints": [],
        "scan": {
            "status": "passed",
            "reason": "r",
            "findings": [
                {"id": "CVE-2026-0002", "package": "ray", "installed": "2.43.0", "severity": "medium"}
            ],
        },
    }
    path = w.root / "out" / "releases" / CPU / "25.03.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))

    code, found = watch(w)

    assert code == 15
    assert found[f"{CPU}:25.03"]["state"] == "out of SLA"  # medium: 180 days from 2026-04-01
    assert found[f"{CPU}:25.03"]["findings"][0]["sla"]["due"] == "2026-09-28"


def test_a_second_watch_the_same_instant_never_replaces_the_first_entry(w: World) -> None:
    from datetime import UTC, datetime

    from xpu_release.release.model.history import append, latest

    now = datetime(2026, 12, 3, 1, 2, 3, tzinfo=UTC)
    ref, at = f"{CPU}:25.03", "2026-12-03T01:02:03Z"
    one = append(w.root, CPU, "25.03", {"ref": ref, "state": "up to date", "checked_at": at}, now)
    two = append(w.root, CPU, "25.03", {"ref": ref, "state": "needs a patch", "checked_at": at}, now)

    assert one != two
    assert json.loads(one.read_text())["state"] == "up to date"
    assert latest(w.root, CPU, "25.03") == {"ref": ref, "state": "needs a patch", "checked_at": at}
    beside = [p.with_suffix(".seen").name for p in (one, two)]  # each entry's seen, beside it
    assert sorted(p.name for p in one.parent.iterdir()) == sorted(
        [one.name, two.name, *beside]
    )  # no temporary


def test_status_and_list_show_the_security_state_of_the_latest_rescan(w: World) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    w.advisory("CVE-2026-0002", "ray", None, severity="MODERATE", published="2026-01-02T00:00:00Z")
    watch(w, today="2026-12-03")

    listed = {r["ref"]: r["security"] for r in json.loads(run(w.root, "list", "--json").stdout)}
    text = run(w.root, "list").stdout
    status = run(w.root, "--registries", str(w.registries), "status", f"{CPU}:25.03", "--json")
    shown = run(w.root, "--registries", str(w.registries), "status", f"{CPU}:25.03").stdout

    training = listed[f"{CPU}:25.03"]
    assert (training["state"], training["sla"], training["open"]["high"], training["open"]["medium"]) == (
        "needs a patch",
        "out",
        1,
        1,
    )
    assert listed["training-xpu-pytorch:25.03"] is None  # never watched: not published
    assert f"{CPU}:25.03  [needs a patch; 1 high, 1 medium open; out of SLA (watched " in text
    assert json.loads(status.stdout)["security"] == training
    assert "security: needs a patch; 1 high, 1 medium open; out of SLA" in shown


def test_list_names_the_patch_that_supersedes_a_release(w: World) -> None:
    w.patch_manifest(CPU, "25.03.1", "25.03")
    w.publish(CPU, "25.03.1", sbom(*TRAINING), salt="patched")
    watch(w)

    text = run(w.root, "list").stdout

    assert f"{CPU}:25.03  [superseded by {CPU}:25.03.1 (watched " in text


def test_a_what_if_day_adds_nothing_to_the_history_and_says_so(w: World) -> None:
    w.advisory("CVE-2026-0002", "ray", None, severity="MODERATE", published=None)  # clock: first seen
    assert w.calendar is not None
    w.calendar.set("2026-12-03")

    result = run(w.root, "--registries", str(w.registries), "watch", f"{CPU}:25.03", "--advisories",
                 str(w.osv), "--today", "2030-01-01", "--json")  # fmt: skip

    said = json.loads(result.stdout)
    assert said["what_if"] is True
    assert said["releases"][0]["history"] is None
    assert said["releases"][0]["findings"][0]["first_seen"] == "2030-01-01"  # seen on the day it asks about
    assert "--today 2030-01-01 is not today (2026-12-03): a what-if" in result.stderr
    assert history(w, CPU, "25.03") == []


def test_a_watch_that_read_no_advisory_says_so_even_when_quiet(w: World) -> None:
    (w.osv / "notes.txt").write_text("the fetch step failed")

    result = run(w.root, "-q", "--registries", str(w.registries), "watch", "--advisories", str(w.osv),
                 "--json")  # fmt: skip

    assert result.exit_code == 0  # every release is up to date against nothing: said, not refused
    assert "warning: 0 advisories read from" in result.stderr
    assert json.loads(result.stdout)["records"]["records"] == 0
