"""Found by the adversary (#39): dates at the edge of the calendar, and ``--today`` as a what-if.

- An advisory whose ``published`` is near the end of the calendar (``9999-12-25``: a damaged or
  hostile record in a mirror) ends the whole ``watch`` in exit 70: the SLA's due day
  overflows ``date``. One record takes down the scheduled check of every release.
- ``--today 9999-12-31`` (an option's value) ends in exit 70 the same way.
- ``--today`` counts SLA days up to another day (a what-if), yet the run writes the re-scan
  history with that day as the day each new finding was *first seen*: a what-if run in the
  future postpones the SLA clock of every later real run (a finding "first seen" in 2030)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ..helpers import run
from ..release.published_kit import CPU, World


def watch(w: World, *args: str, today: str = "2026-12-03") -> Any:
    return run(w.root, "--registries", str(w.registries), "watch", "--advisories", str(w.osv),
               "--today", today, *args)  # fmt: skip


@pytest.mark.timeout(60)
def test_an_advisory_published_at_the_end_of_the_calendar_is_not_an_internal_error(published: World) -> None:
    published.advisory("CVE-2026-0001", "accelerate", "1.6.0", published="9999-12-25T00:00:00Z")

    result = watch(published, "--json")

    assert result.exit_code != 70, result.output  # today: internal error: OverflowError
    assert "Traceback" not in result.output
    found = {r["ref"]: r for r in json.loads(result.stdout)["releases"]}
    assert found[f"{CPU}:25.03"]["state"] in ("needs a patch", "could not check")


@pytest.mark.timeout(60)
def test_today_at_the_end_of_the_calendar_is_a_users_error_or_an_answer_never_70(published: World) -> None:
    published.advisory("CVE-2026-0002", "ray", None, severity="MODERATE", published=None)

    result = watch(published, f"{CPU}:25.03", today="9999-12-31")

    assert result.exit_code != 70, result.output  # today: internal error: OverflowError
    assert "Traceback" not in result.output


@pytest.mark.timeout(60)
def test_a_what_if_run_in_the_future_does_not_postpone_the_sla_of_later_runs(published: World) -> None:
    # no `published`: the clock starts the first time a scan sees the finding
    published.advisory("CVE-2026-0003", "accelerate", "1.6.0", published=None)

    assert watch(published, f"{CPU}:25.03", today="2030-01-01").exit_code == 15  # "what will be due then?"
    result = watch(published, f"{CPU}:25.03", "--json", today="2026-12-03")

    finding = json.loads(result.stdout)["releases"][0]["findings"][0]
    # today: first seen 2030-01-01, due 2030-01-29, "within": a finding seen in the future
    assert finding["first_seen"] <= "2026-12-03", finding
    assert finding["sla"]["since"] <= "2026-12-03", finding["sla"]
