"""What ``watch`` answers about one published release (``Watched``), its open findings
(``Open``), and the exit code of a run's answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import cached_property
from typing import Any

from ...errors import NeedsPatch, OutputError
from ...evidence.scan import Finding
from ..model.history import State
from .basewatch import Reason, Unchecked
from .sla import Clock, overall

ORDER = ("critical", "high", "medium", "low", "unknown")


# Where a scheduled run's patch files wait to be committed (ci/watch.sh, the watch jobs' artifacts).
UNCOMMITTED = "the watch job's artifacts: manifests/, images/"


@dataclass(frozen=True, kw_only=True)
class Open:
    """An open finding (no valid VEX exception) of a published release."""

    finding: Finding
    fix: str | None  # the smallest version that fixes it, where the advisories name one
    first_seen: date
    clock: Clock

    def to_json(self) -> dict[str, Any]:
        """Made once (the history entry and ``--json`` both write it); not to be changed."""
        return self._json

    @cached_property
    def _json(self) -> dict[str, Any]:
        return {**self.finding.to_json(), "fix": self.fix, "first_seen": str(self.first_seen),
                "sla": self.clock.to_json()}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Watched:
    ref: str
    state: State
    checked_at: str
    line: str = ""
    digest: str | None = None
    endpoint: str = ""
    reasons: tuple[Reason, ...] = ()
    open: tuple[Open, ...] = ()
    excepted: int = 0  # findings a valid exception of the image's VEX covers
    superseded_by: str | None = None  # the newest published release of its line
    uncommitted: bool = False  # superseded_by has no manifest in this checkout (not watched until it has)
    pending: str | None = None  # a later release of its line with a manifest, not published
    unchecked: tuple[Unchecked, ...] = ()
    scanned: bool = False  # its SBOM as published was read and scanned
    sboms: int = 0  # the SBOMs attached to it, scanned as one (one, unless attached again)
    history: str | None = None  # the re-scan history entry written
    history_error: str | None = None  # why no entry could be written (the answer stands)
    seen: tuple[tuple[tuple[str, str], date], ...] = ()  # every finding any re-scan saw, first day
    end_of_life: str | None = None  # the date its support ended (state "end of life": skipped)

    @property
    def sla(self) -> str:
        return overall([o.clock for o in self.open])

    @property
    def counts(self) -> dict[str, int]:
        """Open findings by severity, every severity named."""
        return {level: sum(1 for o in self.open if o.finding.level == level) for level in ORDER}

    @property
    def needs_attention(self) -> bool:
        """Someone must act: patch it, decide on what no version fixes, or commit the patch
        that supersedes it (until then no one watches what the line's users pull)."""
        return self.state in ("needs a patch", "out of SLA") or self.uncommitted

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref, "state": self.state, "line": self.line, "digest": self.digest,
            "endpoint": self.endpoint, "checked_at": self.checked_at,
            "reasons": [r.to_json() for r in self.reasons], "sla": self.sla, "open": self.counts,
            "findings": [o.to_json() for o in self.open], "excepted": self.excepted,
            "superseded_by": self.superseded_by, "uncommitted": self.uncommitted, "pending": self.pending,
            "unchecked": [{"what": u.what, "message": u.message, "exit_code": u.exit_code}
                          for u in self.unchecked],
            "scanned": self.scanned, "sboms": self.sboms, "history": self.history,
            "history_error": self.history_error, "end_of_life": self.end_of_life,
        }  # fmt: skip


def exit_code(results: list[Watched]) -> int:
    """0: nothing needs doing; 15: a release needs a patch, is out of SLA or is superseded by a
    patch whose manifest is not committed; a release that could not be checked ends in its
    error's code (the first such), whatever the others need: an incomplete answer is never read
    as "only patches are due"; then 13 when a release's re-scan history could not be written
    (its answer stands, the SLA clocks it carries would not)."""
    for w in results:
        if w.unchecked:
            return w.unchecked[0].exit_code
    if any(w.history_error for w in results):
        return OutputError.exit_code
    return NeedsPatch.exit_code if any(w.needs_attention for w in results) else 0
