"""The patch SLA: how long an open finding may stay unpatched, by severity, kept in the manifest
(``security.sla_days``, inherited through ``extends``; default critical 14 days, high 28, medium
180, low none, as AWS's deep-learning containers publish theirs). A finding's clock starts when
its advisory was published (OSV's ``published``), else the first time a scan of the release saw
it; it is within the SLA until its due day, out of it after. A severity without a limit (low,
unknown, or ``null``) has no clock.

Dates come from outside (an advisory's ``published``, ``--today``) and are data: a publication
later than the day a scan first saw the finding (a date in the future, a damaged record) is not
believed, the clock runs from first seen; a due day past the calendar's end is its last day,
never an error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from ...guard.reading import days_after
from ...manifest import ImageSpec

SlaState = Literal["within", "out", "none"]


@dataclass(frozen=True, kw_only=True)
class Clock:
    """One open finding against the SLA."""

    since: date  # the advisory's publication, else the first time a scan saw it
    source: Literal["published", "first-seen"]
    days: int | None  # the limit for its severity (None: no SLA)
    today: date

    @property
    def age(self) -> int:
        return max((self.today - self.since).days, 0)

    @property
    def due(self) -> date | None:
        return days_after(self.since, self.days) if self.days is not None else None

    @property
    def state(self) -> SlaState:
        if self.due is None:
            return "none"
        return "out" if self.today > self.due else "within"

    def to_json(self) -> dict[str, Any]:
        return {"since": str(self.since), "source": self.source, "age_days": self.age, "days": self.days,
                "due": str(self.due) if self.due else None, "state": self.state}  # fmt: skip


def limit(spec: ImageSpec, level: str) -> int | None:
    """The days a finding of ``level`` may stay open for ``spec`` (None: no SLA)."""
    return dict(spec.sla_days).get(level)


def clock(spec: ImageSpec, level: str, *, published: date | None, first_seen: date, today: date) -> Clock:
    """The clock of a finding of ``level``: from ``published`` unless it is later than
    ``first_seen`` (no scan saw a finding before its advisory was published)."""
    if published is not None and published <= first_seen:
        return Clock(since=published, source="published", days=limit(spec, level), today=today)
    return Clock(since=first_seen, source="first-seen", days=limit(spec, level), today=today)


def overall(clocks: list[Clock]) -> SlaState:
    """A release is out of SLA when one of its open findings is; within when one has a clock."""
    states = {c.state for c in clocks}
    return "out" if "out" in states else "within" if "within" in states else "none"
