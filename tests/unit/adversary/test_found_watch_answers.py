"""Found by the adversary (#39): ``watch`` answers 0 when something needs doing, or when it
could not really check.

- **A release named on the command line that a patch superseded**: docs/using/watching.md says
  of *superseded* "a later release of its line (a patch) is published; that one is checked
  instead". Only the release named is answered for: ``watch training-cpu-pytorch:25.03`` says
  "superseded by …:25.03.1" and exits 0 while 25.03.1, what the line's users pull, has a
  critical advisory out of its SLA (and ``watch --release`` of the same ref patches nothing).
- **A child whose base release could not be checked**: a child needs a patch *through* its
  base when the base needs one; when the base cannot be checked (its SBOM missing, its base
  tag gone), ``watch <child>`` says "up to date", exit 0, and nothing of the base: an
  incomplete answer read as complete (the docs: "an incomplete answer is never read as 'only
  patches are due'").
- **No advisories at all**: an ``--advisories`` folder that is empty (a scheduled job whose
  fetch step failed and left the folder) or holds no usable record: every release "up to
  date", exit 0, and neither the text nor ``--json`` says that 0 advisories were read (the
  gate's own report counts them: "threshold high; 0 advisories"). Worse, that run's entries
  become the latest re-scan of every release: ``status`` and ``list`` say "up to date", and the
  SLA clock of each finding whose advisory has no ``published`` starts again the next night
  (the first time a scan saw it is carried forward only through the latest entry)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ..helpers import run
from ..release.published_kit import CPU, SDK, TRAINING, World, sbom


@pytest.mark.timeout(60)
def test_a_superseded_release_named_alone_has_its_patch_checked_instead(published: World) -> None:
    published.patch_manifest(CPU, "25.03.1", "25.03", "components:\n  accelerate: {version: 1.6.0}\n")
    patched = tuple((n, "1.6.0" if n == "accelerate" else v) for n, v in TRAINING)
    published.publish(CPU, "25.03.1", sbom(*patched), salt="25.03.1")
    published.advisory(
        "CVE-2026-0007", "ray", "2.44.0", severity="CRITICAL", published="2026-11-01T00:00:00Z"
    )

    result = run(published.root, "--registries", str(published.registries), "watch", f"{CPU}:25.03",
                 "--advisories", str(published.osv), "--today", "2026-12-03", "--json")  # fmt: skip

    said = json.loads(result.stdout)
    found = {r["ref"]: r for r in said["releases"]}
    assert found[f"{CPU}:25.03"]["superseded_by"] == f"{CPU}:25.03.1"
    # today: exit 0, and 25.03.1 (critical, out of SLA, fixable) is never looked at
    assert result.exit_code == 15
    assert f"{CPU}:25.03.1" in said["plan"]


@pytest.mark.timeout(60)
def test_a_watch_that_read_no_advisory_does_not_pass_in_silence(published: World) -> None:
    # published.osv exists and is empty
    result = run(published.root, "--registries", str(published.registries), "watch", "--advisories",
                 str(published.osv), "--today", "2026-12-03")  # fmt: skip

    assert "Traceback" not in result.output
    # today: exit 0, "2 up to date, 1 not published", and no word that nothing was read
    assert result.exit_code != 0 or re.search(r"\b0 advisor(y|ies)|no advisor", result.output), result.output


@pytest.mark.timeout(60)
def test_one_run_that_read_no_advisory_does_not_restart_the_sla_clocks(
    published: World, tmp_path: Path
) -> None:
    # no `published`: the clock runs from the first re-scan that saw the finding
    published.advisory("CVE-2026-0008", "accelerate", "1.6.0", published=None)
    empty = tmp_path / "fetch-failed"
    empty.mkdir()

    def watch(advisories: Path, today: str) -> Any:  # a run of that day (it adds to the history)
        assert published.calendar is not None
        published.calendar.set(today)
        result = run(published.root, "--registries", str(published.registries), "watch", f"{CPU}:25.03",
                     "--advisories", str(advisories), "--today", today, "--json")  # fmt: skip
        return json.loads(result.stdout)["releases"][0]

    assert watch(published.osv, "2026-12-03")["findings"][0]["first_seen"] == "2026-12-03"
    assert watch(empty, "2026-12-04")["state"] == "up to date"  # the night the advisory fetch failed
    finding = watch(published.osv, "2027-01-10")["findings"][0]

    # today: first seen 2027-01-10, due 2027-02-07, "within": the empty run's entry, now the
    # latest, carried no finding forward, and the clock started again
    assert finding["first_seen"] == "2026-12-03", finding
    assert finding["sla"]["state"] == "out"


@pytest.mark.timeout(60)
def test_a_child_whose_base_release_could_not_be_checked_is_not_up_to_date(published: World) -> None:
    bare = published.publish(SDK, "2.13.0", None, salt="no sbom")  # the SDK as served: no SBOM attached
    published.pin(CPU, "25.03", bare)
    published.state.manifests.pop(("base/debian/bookworm-python-cxx", "12"))  # and the SDK's base tag gone

    result = run(published.root, "--registries", str(published.registries), "watch", f"{CPU}:25.03",
                 "--advisories", str(published.osv), "--today", "2026-12-03", "--json")  # fmt: skip

    training = json.loads(result.stdout)["releases"][0]
    # today: "up to date", exit 0: whether the SDK needs a patch (its base tag is gone) is unknown
    assert result.exit_code != 0
    assert training["state"] != "up to date", training
