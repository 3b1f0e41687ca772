"""``watch`` and the support dates (#39 with #40 item 1): a release past its manifest's support
date is *end of life*: ``watch`` says so and skips it (no registry asked, no scan, no history
entry, nothing planned), and ``patch`` writes no patch of it. A release still within its date is
watched as any other, to its last day. No engine: the in-process registry of ``published_kit``."""

from __future__ import annotations

import json
from typing import Any

from ..helpers import run
from .published_kit import CPU, SDK, World

TODAY = "2026-12-03"


def support_until(w: World, image: str, version: str, until: str) -> None:
    """The release's own end-of-life date, added to its manifest (metadata: its lock stays current)."""
    path = w.root / "manifests" / image / f"{version}.yaml"
    path.write_text(path.read_text() + f"\nsupport:\n  until: {until}\n")


def watch(w: World, *args: str) -> tuple[int, dict[str, Any], str]:
    result = run(w.root, "--registries", str(w.registries), "watch", "--advisories", str(w.osv),
                 "--today", TODAY, *args)  # fmt: skip
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout) if "--json" in args else {}, result.stdout


def test_a_release_past_its_support_date_is_end_of_life_and_not_watched(published: World) -> None:
    w = published
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")  # a fixable high: 25.03 would need a patch
    support_until(w, CPU, "25.03", "2026-12-01")
    asked = [r for r in w.state.requests if CPU in r]

    code, answer, _ = watch(w, f"{CPU}:25.03", "--json")

    (training,) = answer["releases"]
    assert code == 0  # nothing is due: an end-of-life release gets no patch
    assert training["state"] == "end of life"
    assert training["end_of_life"] == "2026-12-01"
    assert (training["digest"], training["findings"], training["reasons"]) == (None, [], [])
    assert (training["scanned"], training["history"]) == (False, None)
    assert answer["plan"] == []
    assert not (w.root / "out" / "releases" / CPU / "25.03.watch").exists()
    assert [r for r in w.state.requests if CPU in r] == asked  # skipped: the registry was not asked


def test_the_text_answer_says_end_of_life_and_the_others_are_still_watched(published: World) -> None:
    w = published
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    support_until(w, SDK, "2.13.0", "2026-12-03")  # its end-of-life date is today

    code, _, out = watch(w, f"{SDK}:2.13.0", f"{CPU}:25.03")

    assert code == 15  # 25.03 still needs its patch
    assert f"{SDK}:2.13.0  end of life since 2026-12-03: not watched" in out
    assert f"{CPU}:25.03  needs a patch" in out


def test_a_release_on_its_last_supported_day_is_watched(published: World) -> None:
    w = published
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    support_until(w, CPU, "25.03", "2026-12-04")  # ending soon, not ended

    code, answer, _ = watch(w, f"{CPU}:25.03", "--json")

    (training,) = answer["releases"]
    assert code == 15
    assert training["state"] == "needs a patch"
    assert training["end_of_life"] is None
    assert answer["plan"] == [f"{CPU}:25.03"]


def test_patch_writes_no_patch_of_an_end_of_life_release(published: World) -> None:
    w = published
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")
    support_until(w, CPU, "25.03", "2026-01-31")
    before = sorted(p.relative_to(w.root) for p in (w.root / "manifests").rglob("*"))

    result = run(w.root, "--registries", str(w.registries), "patch", f"{CPU}:25.03", "--advisories",
                 str(w.osv), "--today", TODAY, "--json")  # fmt: skip

    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["ref"] is None
    assert said["message"].startswith(f"{CPU}:25.03 is end of life since 2026-01-31: it gets no patch")
    assert sorted(p.relative_to(w.root) for p in (w.root / "manifests").rglob("*")) == before
