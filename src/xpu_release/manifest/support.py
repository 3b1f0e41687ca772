"""How long a release is supported: the manifest's ``support:``, and where a release stands on a
given day (supported, ending soon, end of life).

Support dates are metadata about a release, never an input of its image: ``ImageSpec``'s
content hash (which the inputs digest, the image's labels and its smoke-test mark are made of)
leaves ``support:`` out, and no template reads it, so setting or moving a date never changes
the Dockerfile, the image or its digest. A rerun of ``publish`` attaches the new date as the
release's lifecycle document (``evidence/lifecycle.py``) and nothing else. End of life deletes
nothing: the image stays pullable by tag and digest, and tools say it is past its date.

``support`` is one of:

- ``until: 2026-03-31``: this release's own end-of-life date (not inherited by a release that
  extends it): supported before that day, end of life from it on (the date the lifecycle
  document's ``end-of-life.date`` names, at midnight UTC);
- ``months: 12``: the family's policy, inherited through ``extends:``: that many months after
  the release's date, which is ``released: DATE`` when given (not inherited either), else the
  month a calendar version names (25.03: 2025-03-01, as SOURCE_DATE_EPOCH reads it).

``until`` wins over ``months`` when a release has both (a date set for one release overrides the
family's policy). ``state(spec, today)`` is what ``list``, ``status``, ``doctor`` and the notes
say; ``watch`` skips a release whose state is end of life.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, Protocol

# "Ending soon": this many days or fewer before the end of support, a release says so (list,
# status, doctor), so a successor can be planned while the release is still supported.
SOON_DAYS = 60

_CALVER = re.compile(r"(?P<yy>[0-9]{2})\.(?P<mm>0[1-9]|1[0-2])(?:[.\-_+].*)?")

State = Literal["supported", "ending-soon", "end-of-life", "unknown"]


def calver_month(version: str) -> date | None:
    """The first day of the month a calendar version ``YY.MM`` names (25.03: 2025-03-01, also
    25.03.1 or 25.03-rc1); None for any other version."""
    m = _CALVER.fullmatch(version)
    return date(2000 + int(m["yy"]), int(m["mm"]), 1) if m else None


def add_months(start: date, months: int) -> date:
    """``start`` plus ``months`` calendar months, on the last day of a shorter month (Jan 31 + 1
    month: Feb 28 or 29)."""
    index = start.month - 1 + months
    year, month = start.year + index // 12, index % 12 + 1
    return date(year, month, min(start.day, calendar.monthrange(year, month)[1]))


@dataclass(frozen=True, kw_only=True)
class Support:
    """The manifest's ``support:`` as written (after ``extends:``; validated)."""

    until: date | None = None
    months: int | None = None
    released: date | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Support | None:
        if not data:
            return None
        return cls(until=as_date(data.get("until")), months=data.get("months"),
                   released=as_date(data.get("released")))  # fmt: skip

    def end(self, version: str) -> date | None:
        """The end-of-life date: the first day the release is no longer supported (None: no
        date is known)."""
        if self.until is not None:
            return self.until
        start = self.released or calver_month(version)
        if self.months is None or start is None:
            return None
        return add_months(start, self.months)


def as_date(value: Any) -> date | None:
    """A date as YAML gives one (unquoted: a ``date``) or as a quoted ``YYYY-MM-DD`` string."""
    if value is None:
        return None
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value))


class Supported(Protocol):
    """What ``state`` reads of a release (an ``ImageSpec``)."""

    @property
    def version(self) -> str: ...

    @property
    def support(self) -> Support | None: ...


@dataclass(frozen=True, kw_only=True)
class Standing:
    """Where a release stands on ``today``."""

    state: State
    end: date | None  # the end-of-life date (the first day without support)
    days_left: int | None  # from today to that day (0 or less: end of life)

    @property
    def end_of_life(self) -> bool:
        return self.state == "end-of-life"

    def words(self) -> str:
        """How a person reads it: "supported until 2027-03-31", "ending soon: …", "end of life since …"."""
        if self.end is None:
            return "no support date"
        if self.state == "end-of-life":
            return f"end of life since {self.end}"
        if self.state == "ending-soon":
            return f"ending soon: supported until {self.end} ({self.days_left} days left)"
        return f"supported until {self.end}"

    def to_json(self) -> dict[str, Any]:
        until = str(self.end) if self.end else None
        return {"state": self.state, "until": until, "days_left": self.days_left}


def state(spec: Supported, today: date) -> Standing:
    """Where ``spec``'s release stands on ``today``: supported (more than ``SOON_DAYS`` days
    before its end-of-life date), ending soon, end of life (that day or later), or unknown (no
    date). The call ``watch`` makes to skip a release past its date."""
    end = spec.support.end(spec.version) if spec.support is not None else None
    if end is None:
        return Standing(state="unknown", end=None, days_left=None)
    left = (end - today).days
    if left <= 0:
        return Standing(state="end-of-life", end=end, days_left=left)
    return Standing(state="ending-soon" if left <= SOON_DAYS else "supported", end=end, days_left=left)
